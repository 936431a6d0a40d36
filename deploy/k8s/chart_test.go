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
