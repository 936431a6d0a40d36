package k8s_test

import (
	"os/exec"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// chart is the Helm chart of one connector, rendered and linted by the
// real helm (testenv.Tool finds it).
const chart = "../helm/sink"

// TestChart renders the chart with its default values and with every
// optional part on (ci/full-values.yaml), and checks the manifests exactly
// like the hand-written ones here: the sink accepts the generated config
// with the files and environment the pod gets, probes, memory from
// bufferMemoryMiB, grace period, security context, every Secret key used,
// the Service and ServiceMonitor reach /metrics, the ScaledObject follows
// the config's group and topic.
func TestChart(t *testing.T) {
	helm := testenv.Tool(t, "helm")
	for _, tc := range []struct {
		name, values string
		kinds        []string // kinds the render must contain
	}{
		{"defaults", "", []string{"ConfigMap", "Deployment", "Service", "NetworkPolicy"}},
		{"full", chart + "/ci/full-values.yaml", []string{"ConfigMap", "Secret", "Deployment", "Service", "ServiceMonitor", "ScaledObject", "NetworkPolicy"}},
		{"oauth", chart + "/ci/oauth-values.yaml", []string{"ConfigMap", "Secret", "Deployment", "Service", "NetworkPolicy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--strict", chart}
			if tc.values != "" {
				args = append(args, "-f", tc.values)
			}
			if out, err := exec.Command(helm, append([]string{"lint"}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			args = append([]string{"template", "sink-" + tc.name}, args[1:]...)
			out, err := exec.Command(helm, args...).Output()
			if err != nil {
				msg := err.Error()
				if ee, ok := err.(*exec.ExitError); ok {
					msg += ": " + strings.TrimSpace(string(ee.Stderr))
				}
				t.Fatalf("helm %s: %s", strings.Join(args, " "), msg)
			}
			objs := map[string][]object{}
			parseManifests(t, "helm template", out, objs)
			for _, k := range tc.kinds {
				if len(objs[k]) == 0 {
					t.Errorf("no %s rendered", k)
				}
			}
			checkDeployments(t, objs)
			checkSecrets(t, objs)
		})
	}
}

// A ScaledObject needs exactly one topic: the chart refuses more, in one
// line, instead of scaling on the wrong one.
func TestChartKEDAOneTopic(t *testing.T) {
	helm := testenv.Tool(t, "helm")
	out, err := exec.Command(helm, "template", "x", chart, "--set", "keda.enabled=true",
		"--set", "config.kafka.topics={a,b}").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the Kafka scaler follows one topic") {
		t.Fatalf("helm template with keda and two topics: %v\n%s", err, out)
	}
}

// render runs helm template on the chart with args and parses the result.
func render(t *testing.T, args ...string) map[string][]object {
	t.Helper()
	helm := testenv.Tool(t, "helm")
	out, err := exec.Command(helm, append([]string{"template", "x", chart}, args...)...).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + strings.TrimSpace(string(ee.Stderr))
		}
		t.Fatalf("helm template %s: %s", strings.Join(args, " "), msg)
	}
	objs := map[string][]object{}
	parseManifests(t, "helm template", out, objs)
	return objs
}

// TestChartOAuthClientSecret: the OAuth client secret reaches the sink as
// kafka.sasl.oauth.client_secret_file, from the chart's Secret, or from an
// existing one under the key oauth-client-secret; it is never in the
// ConfigMap, and a pod with no secret files mounts none.
func TestChartOAuthClientSecret(t *testing.T) {
	objs := render(t, "-f", chart+"/ci/oauth-values.yaml")
	d := objs["Deployment"][0]
	spec := &d.Spec.Template.Spec
	p := pod{t: t, objs: objs, spec: spec, c: &spec.Containers[0], deploy: d.Metadata.Name}
	cfg := p.loadConfig("/etc/sink/config.yaml")
	if v, err := cfg.Kafka.SASL.OAuth.ClientSecretValue(); err != nil || v != "oauth-client-secret-value" {
		t.Fatalf("the sink reads the client secret %q, %v; want the value of credentials.oauthClientSecret", v, err)
	}
	if cfg.Kafka.SASL.OAuth.ClientID != "payments-sink" || len(cfg.Kafka.SASL.OAuth.Extensions) != 2 {
		t.Fatalf("kafka.sasl.oauth %+v", cfg.Kafka.SASL.OAuth)
	}
	for _, cm := range objs["ConfigMap"] {
		for _, v := range cm.Data {
			if strings.Contains(v, "oauth-client-secret-value") {
				t.Fatalf("ConfigMap %s holds the client secret", cm.Metadata.Name)
			}
		}
	}

	objs = render(t, "-f", chart+"/ci/oauth-values.yaml", "--set", "credentials.oauthClientSecret=",
		"--set", "existingSecret=payments-sink-credentials", "--set", "existingSecretKeys.oauthClientSecret=true")
	if len(objs["Secret"]) != 0 {
		t.Fatalf("a Secret is rendered beside existingSecret: %v", objs["Secret"][0].Metadata.Name)
	}
	spec = &objs["Deployment"][0].Spec.Template.Spec
	var items []string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			for _, it := range v.Secret.Items {
				items = append(items, v.Secret.SecretName+"/"+it.Key+"->"+it.Path)
			}
		}
	}
	if strings.Join(items, ",") != "payments-sink-credentials/oauth-client-secret->oauth-client-secret" {
		t.Fatalf("secret volume items %v; want the existing Secret's oauth-client-secret", items)
	}
	if !strings.Contains(objs["ConfigMap"][0].Data["config.yaml"], "client_secret_file: /etc/sink/secrets/oauth-client-secret") {
		t.Fatalf("config.yaml does not name the mounted file:\n%s", objs["ConfigMap"][0].Data["config.yaml"])
	}

	objs = render(t)
	for _, v := range objs["Deployment"][0].Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			t.Fatalf("the default values mount Secret %s", v.Secret.SecretName)
		}
	}
}
