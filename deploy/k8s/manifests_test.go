// Package k8s_test checks the Kubernetes manifests in this directory against
// the code they deploy, since no cluster runs here: each Deployment's config
// (from its ConfigMap, with the files and environment the pod would get)
// passes config.Parse, the probes hit paths internal/metrics serves on the
// config's http.listen port, the memory limit covers batch.buffer_memory, the
// grace period covers shutdown_timeout, and the container runs as the image's
// non-root user with the image's command.
package k8s_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"sink/config"
	"sink/internal/metrics"
	"sink/internal/status"
	"sink/internal/testenv"
)

// The parts of the Kubernetes objects the checks read.
type (
	object struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name   string            `yaml:"name"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
		Spec       deploymentSpec    `yaml:"spec"`
		Raw        map[string]any    `yaml:"-"` // the whole document, for the kinds read by path
	}
	deploymentSpec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot *bool `yaml:"runAsNonRoot"`
			RunAsUser    *int  `yaml:"runAsUser"`
			FSGroup      *int  `yaml:"fsGroup"`
		} `yaml:"securityContext"`
		Containers []container `yaml:"containers"`
		Volumes    []volume    `yaml:"volumes"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
				ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		Lifecycle      *struct {
			PreStop map[string]any `yaml:"preStop"`
		} `yaml:"lifecycle"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
		} `yaml:"volumeMounts"`
	}
	keyRef struct {
		Name string `yaml:"name"`
		Key  string `yaml:"key"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
		TimeoutSeconds int `yaml:"timeoutSeconds"`
	}
	volume struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name  string `yaml:"name"`
			Items []item `yaml:"items"`
		} `yaml:"configMap"`
		Secret *struct {
			SecretName  string `yaml:"secretName"`
			Items       []item `yaml:"items"`
			DefaultMode *int   `yaml:"defaultMode"`
		} `yaml:"secret"`
	}
	item struct {
		Key  string `yaml:"key"`
		Path string `yaml:"path"`
	}
)

// manifests reads every YAML document of every *.yaml file here.
func manifests(t *testing.T) map[string][]object {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests (%v)", err)
	}
	out := map[string][]object{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parseManifests(t, f, data, out)
	}
	return out
}

// parseManifests adds every YAML document of data (named name in errors)
// to out, by kind.
func parseManifests(t *testing.T, name string, data []byte, out map[string][]object) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		var o object
		if err := node.Decode(&o); err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		if o.Kind == "" {
			continue // an empty document
		}
		if err := node.Decode(&o.Raw); err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		if o.APIVersion == "" || o.Metadata.Name == "" {
			t.Fatalf("%s: document %d (%s) has no apiVersion or metadata.name", name, i, o.Kind)
		}
		out[o.Kind] = append(out[o.Kind], o)
	}
}

func find(objs []object, name string) *object {
	for i := range objs {
		if objs[i].Metadata.Name == name {
			return &objs[i]
		}
	}
	return nil
}

// pod is one Deployment's pod as the kubelet would assemble it: its files
// and environment.
type pod struct {
	t      *testing.T
	objs   map[string][]object
	spec   *podSpec
	c      *container
	deploy string
}

// file returns the content the container sees at p, resolving the volume
// mount, the volume and its ConfigMap or Secret key.
func (p pod) file(path_ string) (string, error) {
	for _, m := range p.c.VolumeMounts {
		var key string
		switch {
		case m.SubPath != "" && path_ == m.MountPath:
			key = m.SubPath
		case m.SubPath == "" && strings.HasPrefix(path_, m.MountPath+"/"):
			key = strings.TrimPrefix(path_, m.MountPath+"/")
		default:
			continue
		}
		for _, v := range p.spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				key, err := itemKey(v.ConfigMap.Items, key, m.SubPath != "")
				if err != nil {
					return "", fmt.Errorf("%s: volume %s: %w", path_, v.Name, err)
				}
				return p.data("ConfigMap", v.ConfigMap.Name, key)
			case v.Secret != nil:
				key, err := itemKey(v.Secret.Items, key, m.SubPath != "")
				if err != nil {
					return "", fmt.Errorf("%s: volume %s: %w", path_, v.Name, err)
				}
				return p.data("Secret", v.Secret.SecretName, key)
			}
			return "", fmt.Errorf("%s: volume %s is neither a ConfigMap nor a Secret", path_, v.Name)
		}
		return "", fmt.Errorf("%s: volume mount %s names no volume", path_, m.Name)
	}
	return "", fmt.Errorf("%s: no volume mount provides it", path_)
}

// itemKey maps a path inside a volume to its key: with items, only the
// listed paths exist.
func itemKey(items []item, p string, subPath bool) (string, error) {
	if len(items) == 0 {
		return p, nil
	}
	for _, it := range items {
		if it.Path == p || (subPath && it.Key == p) {
			return it.Key, nil
		}
	}
	return "", fmt.Errorf("items project no %q", p)
}

func (p pod) data(kind, name, key string) (string, error) {
	o := find(p.objs[kind], name)
	if o == nil {
		return "", fmt.Errorf("%s %s is not in the manifests", kind, name)
	}
	if v, ok := o.Data[key]; ok {
		return v, nil
	}
	if v, ok := o.StringData[key]; ok {
		return v, nil
	}
	return "", fmt.Errorf("%s %s has no key %q", kind, name, key)
}

// environ is the container's environment, with Secret and ConfigMap values
// resolved.
func (p pod) environ() []string {
	var env []string
	for _, e := range p.c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			var err error
			switch {
			case e.ValueFrom.SecretKeyRef != nil:
				v, err = p.data("Secret", e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
			case e.ValueFrom.ConfigMapKeyRef != nil:
				v, err = p.data("ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name, e.ValueFrom.ConfigMapKeyRef.Key)
			}
			if err != nil {
				p.t.Errorf("deployment %s: env %s: %v", p.deploy, e.Name, err)
			}
		}
		env = append(env, e.Name+"="+v)
	}
	return env
}

// fileKeys are the config keys that name files in the pod.
var fileKeys = []string{
	"kafka.tls.ca_file", "kafka.tls.cert_file", "kafka.tls.key_file", "kafka.sasl.password_file", "kafka.sasl.oauth.client_secret_file",
	"clickhouse.tls.ca_file", "clickhouse.tls.cert_file", "clickhouse.tls.key_file", "clickhouse.password_file",
}

// loadConfig reads the config the container's --config names, and parses it
// the way the sink would in the pod: every file it names must be mounted;
// each is materialized in a temporary root (certificates and keys made
// fresh, since the manifests hold placeholders) and the paths are pointed
// there.
func (p pod) loadConfig(path string) *config.Config {
	t := p.t
	text, err := p.file(path)
	if err != nil {
		t.Fatalf("deployment %s: config: %v", p.deploy, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("deployment %s: %s: %v", p.deploy, path, err)
	}
	root := t.TempDir()
	pki := testenv.NewPKI(t)
	done := map[string]bool{}
	var swaps []string // old, new pairs for strings.NewReplacer: one pass, no overlaps
	for _, key := range fileKeys {
		v := lookup(doc, key)
		if v == "" || done[v] {
			continue
		}
		done[v] = true
		content, err := p.file(v)
		if err != nil {
			t.Errorf("deployment %s: %s (%s): %v", p.deploy, key, v, err)
			continue
		}
		switch {
		case strings.HasSuffix(key, "ca_file"):
			content = readFile(t, pki.CAFile)
		case strings.HasSuffix(key, "cert_file"):
			content = readFile(t, pki.CertFile)
		case strings.HasSuffix(key, "key_file"):
			content = readFile(t, pki.KeyFile)
		}
		local := filepath.Join(root, filepath.FromSlash(v))
		if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		swaps = append(swaps, v, local)
	}
	text = strings.NewReplacer(swaps...).Replace(text)
	cfg, err := config.Parse([]byte(text), p.environ())
	if err != nil {
		t.Fatalf("deployment %s: the sink rejects its config:\n%v", p.deploy, err)
	}
	return cfg
}

func lookup(doc map[string]any, key string) string {
	var v any = doc
	for _, part := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[part]
	}
	s, _ := v.(string)
	return s
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerfile reads the image's CMD and USER.
func dockerfile(t *testing.T) (cmd []string, uid int) {
	t.Helper()
	data := readFile(t, "../../Dockerfile")
	m := regexp.MustCompile(`(?m)^CMD\s+(\[.*\])\s*$`).FindStringSubmatch(data)
	if m == nil {
		t.Fatal("Dockerfile: no CMD [...]")
	}
	if err := yaml.Unmarshal([]byte(m[1]), &cmd); err != nil {
		t.Fatalf("Dockerfile CMD: %v", err)
	}
	u := regexp.MustCompile(`(?m)^USER\s+(\d+)`).FindStringSubmatch(data)
	if u == nil {
		t.Fatal("Dockerfile: no numeric USER")
	}
	uid, _ = strconv.Atoi(u[1])
	return cmd, uid
}

func TestDeployments(t *testing.T) { checkDeployments(t, manifests(t)) }

// checkDeployments checks every Deployment of objs against the code it
// deploys (see the package comment).
func checkDeployments(t *testing.T, objs map[string][]object) {
	if len(objs["Deployment"]) == 0 {
		t.Fatal("no Deployment")
	}
	imageCmd, imageUID := dockerfile(t)

	for _, d := range objs["Deployment"] {
		t.Run(d.Metadata.Name, func(t *testing.T) {
			spec := &d.Spec.Template.Spec
			for k, v := range d.Spec.Selector.MatchLabels {
				if d.Spec.Template.Metadata.Labels[k] != v {
					t.Errorf("selector %s=%s does not match the pod labels %v", k, v, d.Spec.Template.Metadata.Labels)
				}
			}
			if d.Spec.Replicas == nil && scaledBy(objs, d.Metadata.Name) == nil {
				t.Errorf("replicas: want at least 1 (or a ScaledObject that sets them)")
			} else if d.Spec.Replicas != nil && *d.Spec.Replicas < 1 {
				t.Errorf("replicas: want at least 1")
			}
			if len(spec.Containers) != 1 {
				t.Fatalf("%d containers; want the sink alone", len(spec.Containers))
			}
			c := &spec.Containers[0]
			p := pod{t: t, objs: objs, spec: spec, c: c, deploy: d.Metadata.Name}

			// The image's own command, with the config where the image expects it.
			if len(c.Command) != 0 || strings.Join(c.Args, " ") != strings.Join(imageCmd, " ") {
				t.Errorf("command %q args %q; want the image's CMD %q", c.Command, c.Args, imageCmd)
			}
			cfg := p.loadConfig(imageCmd[len(imageCmd)-1])
			checkScaledObject(t, scaledBy(objs, d.Metadata.Name), cfg)
			checkScrapeObjects(t, objs, d, c)
			checkNetworkPolicy(t, objs, d, c)
			if cfg.HTTP.Admin {
				t.Errorf("http.admin: true on the pod's address: keep the admin endpoints off in the shipped manifests")
			}

			// The probes and the scrape reach the config's http.listen.
			host, port, err := net.SplitHostPort(cfg.HTTP.Listen)
			if err != nil {
				t.Fatalf("http.listen %q: %v", cfg.HTTP.Listen, err)
			}
			if host != "" && host != "0.0.0.0" && host != "::" {
				t.Errorf("http.listen %q: the kubelet probes the pod IP; listen on all interfaces (0.0.0.0:%s)", cfg.HTTP.Listen, port)
			}
			ports := map[string]string{}
			for _, cp := range c.Ports {
				ports[cp.Name] = strconv.Itoa(cp.ContainerPort)
				ports[strconv.Itoa(cp.ContainerPort)] = strconv.Itoa(cp.ContainerPort)
			}
			if _, ok := ports[port]; !ok {
				t.Errorf("http.listen port %s is not a containerPort (%v)", port, c.Ports)
			}
			// The handler sink run serves, with its Host and Fetch-Metadata
			// checks, asked as the kubelet and Prometheus ask: the pod's IP
			// address as Host.
			m := metrics.New(cfg.Kafka.Group)
			st := status.New(status.InfoFor(cfg, "test"), status.WorkerID(cfg.HTTP.Listen), m)
			srv, err := metrics.ServeHandler("127.0.0.1:0", st.Routes(m.Handler()))
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close(t.Context())
			get := func(what, path string, portRef any, want int) string {
				t.Helper()
				if got := ports[fmt.Sprint(portRef)]; got != port {
					t.Errorf("%s: port %v is container port %q, not http.listen's %s", what, portRef, got, port)
				}
				req, err := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = net.JoinHostPort("10.244.1.17", port) // a pod IP
				req.Header.Set("User-Agent", "kube-probe/1.33")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != want {
					t.Errorf("%s: GET %s = %s (%s); the sink serves it with %d", what, path, resp.Status, bytes.TrimSpace(body), want)
				}
				return string(body)
			}
			for name, pr := range map[string]*probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
				if pr == nil || pr.HTTPGet == nil {
					t.Errorf("%s: want an httpGet probe", name)
				}
			}
			if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil {
				if c.LivenessProbe.HTTPGet.Path != "/healthz" {
					t.Errorf("livenessProbe path %q, want /healthz", c.LivenessProbe.HTTPGet.Path)
				}
				get("livenessProbe", c.LivenessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Port, http.StatusOK)
			}
			if rp := c.ReadinessProbe; rp != nil && rp.HTTPGet != nil {
				if rp.HTTPGet.Path != "/readyz" {
					t.Errorf("readinessProbe path %q, want /readyz", rp.HTTPGet.Path)
				}
				// Not ready before joining the group: 503 with the reason.
				body := get("readinessProbe", rp.HTTPGet.Path, rp.HTTPGet.Port, http.StatusServiceUnavailable)
				if !strings.Contains(body, cfg.Kafka.Group) {
					t.Errorf("readinessProbe: body %q does not name group %q", body, cfg.Kafka.Group)
				}
				// /readyz pings ClickHouse for up to 0.9s.
				if rp.TimeoutSeconds < 1 {
					t.Errorf("readinessProbe timeoutSeconds %d: /readyz may take 0.9s", rp.TimeoutSeconds)
				}
			}
			if a := d.Spec.Template.Metadata.Annotations; a["prometheus.io/scrape"] == "true" {
				get("prometheus.io/path", a["prometheus.io/path"], a["prometheus.io/port"], http.StatusOK)
			}

			// Memory: the limit covers twice the batch buffer (GC headroom)
			// plus 100Mi, requests do not exceed limits, GOMEMLIMIT is below
			// the limit.
			limit := quantity(t, "limits.memory", c.Resources.Limits["memory"])
			request := quantity(t, "requests.memory", c.Resources.Requests["memory"])
			need := 2*int64(cfg.Batch.BufferMemory) + 100<<20
			if limit < need {
				t.Errorf("limits.memory %s (%d bytes) < 2 x batch.buffer_memory (%v) + 100Mi = %d bytes", c.Resources.Limits["memory"], limit, cfg.Batch.BufferMemory, need)
			}
			if request > limit {
				t.Errorf("requests.memory %d > limits.memory %d", request, limit)
			}
			for _, e := range p.environ() {
				if v, ok := strings.CutPrefix(e, "GOMEMLIMIT="); ok {
					soft, err := config.ParseByteSize(v)
					if err != nil || int64(soft) >= limit || soft <= cfg.Batch.BufferMemory {
						t.Errorf("GOMEMLIMIT %q (%v): want between batch.buffer_memory and limits.memory", v, err)
					}
				}
			}

			// The grace period outlasts the flush-and-commit shutdown (and a
			// preStop sleep, if there is one).
			grace := 30 // Kubernetes' default
			if spec.TerminationGracePeriodSeconds != nil {
				grace = *spec.TerminationGracePeriodSeconds
			}
			preStop := 0
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
				if s, ok := c.Lifecycle.PreStop["sleep"].(map[string]any); ok {
					preStop, _ = s["seconds"].(int)
				} else {
					t.Errorf("preStop %v: only a sleep action is accounted for here", c.Lifecycle.PreStop)
				}
			}
			if min := int(cfg.ShutdownTimeout.Seconds()) + preStop + 5; grace < min {
				t.Errorf("terminationGracePeriodSeconds %d: want at least shutdown_timeout (%v) + preStop (%ds) + 5s = %ds", grace, cfg.ShutdownTimeout, preStop, min)
			}

			// Non-root, as the image's user, and able to read its secrets.
			sc := spec.SecurityContext
			if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Error("securityContext.runAsNonRoot: want true")
			}
			if sc.RunAsUser != nil && *sc.RunAsUser != imageUID {
				t.Errorf("securityContext.runAsUser %d, the image's USER is %d", *sc.RunAsUser, imageUID)
			}
			if csc := c.SecurityContext; csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
				t.Error("container securityContext: want allowPrivilegeEscalation false and readOnlyRootFilesystem true")
			}
			for _, v := range spec.Volumes {
				if v.Secret == nil || v.Secret.DefaultMode == nil {
					continue
				}
				mode := *v.Secret.DefaultMode
				if mode&0o004 != 0 {
					t.Errorf("volume %s: defaultMode %#o lets every user read the secret", v.Name, mode)
				}
				if mode&0o040 == 0 || sc.FSGroup == nil {
					t.Errorf("volume %s: defaultMode %#o with fsGroup %v: user %d cannot read it (want group-readable and fsGroup)", v.Name, mode, sc.FSGroup, imageUID)
				}
			}
		})
	}
}

// The Secret only holds what the pods (or KEDA) use, and the ConfigMaps hold no
// password (config.Parse would refuse it in config.yaml; other keys are
// checked by name).
func TestSecretsAreUsed(t *testing.T) { checkSecrets(t, manifests(t)) }

func checkSecrets(t *testing.T, objs map[string][]object) {
	used := map[string]bool{}
	for _, d := range objs["Deployment"] {
		spec := d.Spec.Template.Spec
		for _, c := range spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					used[e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key] = true
				}
			}
		}
		for _, v := range spec.Volumes {
			if v.Secret != nil {
				for _, it := range v.Secret.Items {
					used[v.Secret.SecretName+"/"+it.Key] = true
				}
			}
		}
	}
	// KEDA reads the Kafka credentials too.
	for _, ta := range objs["TriggerAuthentication"] {
		refs, _ := at(ta.Raw, "spec", "secretTargetRef").([]any)
		for _, r := range refs {
			used[fmt.Sprint(at(r, "name"))+"/"+fmt.Sprint(at(r, "key"))] = true
		}
	}
	for _, s := range objs["Secret"] {
		for k := range s.StringData {
			if !used[s.Metadata.Name+"/"+k] {
				t.Errorf("Secret %s key %s is not used by any Deployment", s.Metadata.Name, k)
			}
		}
	}
	for _, cm := range objs["ConfigMap"] {
		for k := range cm.Data {
			if strings.Contains(strings.ToLower(path.Base(k)), "password") {
				t.Errorf("ConfigMap %s has key %s: passwords belong in a Secret", cm.Metadata.Name, k)
			}
		}
	}
}

// quantity parses a Kubernetes memory quantity: plain bytes, or a binary
// (Ki, Mi, Gi, Ti) or decimal (k, M, G, T) suffix.
func quantity(t *testing.T, what, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^(\d+)([KMGT]i|[kMGT])?$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%s: %q is not a memory quantity this test understands", what, s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	mult := map[string]int64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
		"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m[2]]
	return n * mult
}

// at walks v by map keys and list indexes; nil when the path is not there.
func at(v any, path ...any) any {
	for _, k := range path {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// scaledBy returns the KEDA ScaledObject whose target is the Deployment
// named name, or nil.
func scaledBy(objs map[string][]object, name string) *object {
	for i, o := range objs["ScaledObject"] {
		if at(o.Raw, "spec", "scaleTargetRef", "name") == name {
			return &objs["ScaledObject"][i]
		}
	}
	return nil
}

// checkScaledObject checks that a ScaledObject scales on the lag of the
// consumer group and topic the sink's config consumes, up to a bounded
// replica count, without idle consumers.
func checkScaledObject(t *testing.T, so *object, cfg *config.Config) {
	t.Helper()
	if so == nil {
		return
	}
	spec := so.Raw["spec"]
	minR, _ := at(spec, "minReplicaCount").(int)
	maxR, _ := at(spec, "maxReplicaCount").(int)
	if minR < 1 || maxR < minR {
		t.Errorf("ScaledObject %s: minReplicaCount %v maxReplicaCount %v: want 1 <= min <= max (max: the partition count)",
			so.Metadata.Name, at(spec, "minReplicaCount"), at(spec, "maxReplicaCount"))
	}
	triggers, _ := at(spec, "triggers").([]any)
	if len(triggers) != 1 || at(triggers[0], "type") != "kafka" {
		t.Fatalf("ScaledObject %s: triggers %v, want one of type kafka", so.Metadata.Name, triggers)
	}
	md := at(triggers[0], "metadata")
	f := func(key, want string) {
		t.Helper()
		if got := fmt.Sprint(at(md, key)); got != want {
			t.Errorf("ScaledObject %s: kafka trigger %s = %q, want %q", so.Metadata.Name, key, got, want)
		}
	}
	f("consumerGroup", cfg.Kafka.Group)
	f("bootstrapServers", strings.Join(cfg.Kafka.Brokers, ","))
	f("allowIdleConsumers", "false")
	f("offsetResetPolicy", cfg.Kafka.StartOffset)
	if topic := fmt.Sprint(at(md, "topic")); !slices.Contains(cfg.Kafka.Topics, topic) {
		t.Errorf("ScaledObject %s: topic %q is not one the sink consumes (%v)", so.Metadata.Name, topic, cfg.Kafka.Topics)
	}
	if n, err := strconv.Atoi(fmt.Sprint(at(md, "lagThreshold"))); err != nil || n < 1 {
		t.Errorf("ScaledObject %s: lagThreshold %v: want a positive number of records (a string)", so.Metadata.Name, at(md, "lagThreshold"))
	}
}

// checkNetworkPolicy checks that a NetworkPolicy selects the Deployment's
// pods and lets peers reach only the http port: every ingress rule names
// that port (by name or number) and nothing else, with the peers it
// admits. The kubelet's probes come from the node, which a NetworkPolicy
// does not block.
func checkNetworkPolicy(t *testing.T, objs map[string][]object, d object, c *container) {
	t.Helper()
	podLabels := d.Spec.Template.Metadata.Labels
	httpPort := map[string]bool{}
	for _, cp := range c.Ports {
		if cp.Name == "http" {
			httpPort["http"], httpPort[strconv.Itoa(cp.ContainerPort)] = true, true
		}
	}
	var found bool
	for _, np := range objs["NetworkPolicy"] {
		sel, _ := at(np.Raw, "spec", "podSelector", "matchLabels").(map[string]any)
		if len(sel) == 0 || !labelsMatch(sel, podLabels) {
			continue
		}
		found = true
		if types := fmt.Sprint(at(np.Raw, "spec", "policyTypes")); !strings.Contains(types, "Ingress") {
			t.Errorf("NetworkPolicy %s: policyTypes %s; want Ingress", np.Metadata.Name, types)
		}
		rules, _ := at(np.Raw, "spec", "ingress").([]any)
		for i, r := range rules {
			ps, _ := at(r, "ports").([]any)
			if len(ps) == 0 {
				t.Errorf("NetworkPolicy %s: ingress[%d] opens every port; want the http port only", np.Metadata.Name, i)
			}
			for _, p := range ps {
				if !httpPort[fmt.Sprint(at(p, "port"))] {
					t.Errorf("NetworkPolicy %s: ingress[%d] opens port %v; want the http port only", np.Metadata.Name, i, at(p, "port"))
				}
			}
		}
	}
	if !found {
		t.Errorf("no NetworkPolicy selects the pods of %s: /status and /metrics would be open to every pod of the cluster", d.Metadata.Name)
	}
}

// labelsMatch reports whether labels has every key and value of sel.
func labelsMatch(sel map[string]any, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// checkScrapeObjects checks that each Service selecting the Deployment's
// pods forwards to the container's http port, and each ServiceMonitor
// selects such a Service by label and scrapes a port it has, at /metrics.
func checkScrapeObjects(t *testing.T, objs map[string][]object, d object, c *container) {
	t.Helper()
	podLabels := d.Spec.Template.Metadata.Labels
	subset := func(sel any, labels map[string]string) bool {
		m, ok := sel.(map[string]any)
		if !ok || len(m) == 0 {
			return false
		}
		for k, v := range m {
			if labels[k] != fmt.Sprint(v) {
				return false
			}
		}
		return true
	}
	for _, svc := range objs["Service"] {
		if !subset(at(svc.Raw, "spec", "selector"), podLabels) {
			continue
		}
		ports, _ := at(svc.Raw, "spec", "ports").([]any)
		var names []string
		for _, sp := range ports {
			target := fmt.Sprint(at(sp, "targetPort"))
			ok := false
			for _, cp := range c.Ports {
				ok = ok || target == cp.Name || target == strconv.Itoa(cp.ContainerPort)
			}
			if !ok {
				t.Errorf("Service %s: targetPort %s is no container port of %s", svc.Metadata.Name, target, d.Metadata.Name)
			}
			names = append(names, fmt.Sprint(at(sp, "name")))
		}
		for _, sm := range objs["ServiceMonitor"] {
			if !subset(at(sm.Raw, "spec", "selector", "matchLabels"), svc.Metadata.Labels) {
				continue
			}
			eps, _ := at(sm.Raw, "spec", "endpoints").([]any)
			for _, ep := range eps {
				if port := fmt.Sprint(at(ep, "port")); !slices.Contains(names, port) {
					t.Errorf("ServiceMonitor %s: port %q is not a port of Service %s (%v)", sm.Metadata.Name, port, svc.Metadata.Name, names)
				}
				if path := at(ep, "path"); path != nil && path != "/metrics" {
					t.Errorf("ServiceMonitor %s: path %v, the sink serves /metrics", sm.Metadata.Name, path)
				}
			}
		}
	}
	for _, sm := range objs["ServiceMonitor"] {
		found := false
		for _, svc := range objs["Service"] {
			found = found || subset(at(sm.Raw, "spec", "selector", "matchLabels"), svc.Metadata.Labels)
		}
		if !found {
			t.Errorf("ServiceMonitor %s selects no Service", sm.Metadata.Name)
		}
	}
}
