package sink_test

// docker-compose.yml cannot run on the project's machines (no Docker engine), so
// this test checks, by reading the files, what would otherwise only fail on a
// user's laptop: the services exist, the published ports are the local stack's,
// every mounted host file exists, and the sink's config points at the compose
// services on the ports they listen on.

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"sink/config"
)

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   any               `yaml:"depends_on"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

// sinkConfig holds the parts of the sink's YAML config this test cross-checks;
// config/ owns the full schema.
type sinkConfig struct {
	Name  string `yaml:"name"`
	Kafka struct {
		Brokers []string `yaml:"brokers"`
		Group   string   `yaml:"group"`
		Topics  []string `yaml:"topics"`
	} `yaml:"kafka"`
	ClickHouse struct {
		Addrs    []string `yaml:"addrs"`
		Database string   `yaml:"database"`
	} `yaml:"clickhouse"`
	Routes []struct {
		Topic  string `yaml:"topic"`
		Table  string `yaml:"table"`
		Format string `yaml:"format"`
	} `yaml:"routes"`
	HTTP struct {
		Listen string `yaml:"listen"`
	} `yaml:"http"`
}

const sinkConfigPath = "/etc/sink/config.yaml" // where the image's CMD reads it

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"kafka", "clickhouse", "sink"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("docker-compose.yml: no service %q", name)
		}
	}
	return c
}

// published maps host port -> container port for a service's "ports" entries
// ("[ip:]host:container[/proto]").
func published(t *testing.T, svc string, s composeService) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range s.Ports {
		parts := strings.Split(strings.SplitN(p, "/", 2)[0], ":")
		if len(parts) < 2 {
			t.Errorf("service %s: port %q publishes no fixed host port", svc, p)
			continue
		}
		m[parts[len(parts)-2]] = parts[len(parts)-1]
	}
	return m
}

// mounts maps container path -> host path of a service's bind mounts.
func mounts(s composeService) map[string]string {
	m := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && (strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/")) {
			m[parts[1]] = parts[0]
		}
	}
	return m
}

func TestComposeServicesAndPorts(t *testing.T) {
	c := loadCompose(t)

	// Host ports are the local stack's (scripts/stack.sh, internal/testenv), so the
	// same tools and tests work against either.
	want := map[string][]string{"kafka": {"9092"}, "clickhouse": {"9000", "8123"}}
	for svc, ports := range want {
		got := published(t, svc, c.Services[svc])
		for _, p := range ports {
			if _, ok := got[p]; !ok {
				t.Errorf("service %s does not publish host port %s (ports: %v)", svc, p, c.Services[svc].Ports)
			}
		}
	}
	if got := published(t, "clickhouse", c.Services["clickhouse"]); got["9000"] != "9000" || got["8123"] != "8123" {
		t.Errorf("clickhouse: host 9000/8123 must map to the server's 9000/8123, got %v", got)
	}

	// Host 9092 must reach a listener that advertises the host-side address,
	// otherwise clients on the host get redirected to a name they cannot resolve.
	k := c.Services["kafka"]
	hostTarget := published(t, "kafka", k)["9092"]
	listener := listenerOnPort(k.Environment["KAFKA_LISTENERS"], hostTarget)
	if listener == "" {
		t.Fatalf("kafka: host port 9092 maps to container port %s, where KAFKA_LISTENERS (%q) has no listener",
			hostTarget, k.Environment["KAFKA_LISTENERS"])
	}
	if adv := advertised(k.Environment["KAFKA_ADVERTISED_LISTENERS"], listener); adv != "127.0.0.1:9092" && adv != "localhost:9092" {
		t.Errorf("kafka: listener %s (host port 9092) advertises %q, want 127.0.0.1:9092", listener, adv)
	}

	// The compose Kafka is the release the local stack runs.
	pom, err := os.ReadFile("scripts/kafka/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<kafka\.version>([^<]+)</kafka\.version>`).FindSubmatch(pom)
	if m == nil {
		t.Fatal("scripts/kafka/pom.xml: no <kafka.version>")
	}
	if want := "apache/kafka:" + string(m[1]); k.Image != want {
		t.Errorf("kafka image %q, want %q (the version in scripts/kafka/pom.xml)", k.Image, want)
	}
}

func TestComposeMountsExist(t *testing.T) {
	c := loadCompose(t)
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src := strings.Split(v, ":")[0]
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				if _, err := os.Stat(filepath.FromSlash(src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("service %s uses volume %q, not declared under top-level volumes", name, src)
			}
		}
	}
	// The sink is built from this repository's Dockerfile.
	if c.Services["sink"].Build == nil {
		t.Error("service sink has no build section")
	}
	if _, err := os.Stat("Dockerfile"); err != nil {
		t.Error(err)
	}
}

func TestComposeSinkConfig(t *testing.T) {
	c := loadCompose(t)
	host, ok := mounts(c.Services["sink"])[sinkConfigPath]
	if !ok {
		t.Fatalf("service sink does not mount a config file at %s", sinkConfigPath)
	}
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), `"`+sinkConfigPath+`"`) {
		t.Errorf("Dockerfile's CMD does not read %s, where compose mounts the config", sinkConfigPath)
	}

	data, err := os.ReadFile(filepath.FromSlash(host))
	if err != nil {
		t.Fatal(err)
	}
	var cfg sinkConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	// And the sink itself accepts it (no env: the container sets none).
	if _, err := config.Load(filepath.FromSlash(host), nil); err != nil {
		t.Errorf("the sink rejects %s: %v", host, err)
	}

	k := c.Services["kafka"]
	if len(cfg.Kafka.Brokers) == 0 {
		t.Errorf("%s: no kafka.brokers", host)
	}
	for _, b := range cfg.Kafka.Brokers {
		svc, port := splitAddr(t, b)
		if svc != "kafka" {
			t.Errorf("%s: broker %s is not the compose service kafka", host, b)
			continue
		}
		// The sink must bootstrap from a listener whose advertised address is also
		// reachable inside the compose network.
		listener := listenerOnPort(k.Environment["KAFKA_LISTENERS"], port)
		if listener == "" {
			t.Errorf("%s: broker %s: kafka has no listener on port %s (KAFKA_LISTENERS %q)",
				host, b, port, k.Environment["KAFKA_LISTENERS"])
		} else if adv := advertised(k.Environment["KAFKA_ADVERTISED_LISTENERS"], listener); adv != b {
			t.Errorf("%s: broker %s: listener %s advertises %q, want %s", host, b, listener, adv, b)
		}
	}

	if len(cfg.ClickHouse.Addrs) == 0 {
		t.Errorf("%s: no clickhouse.addrs", host)
	}
	for _, a := range cfg.ClickHouse.Addrs {
		svc, port := splitAddr(t, a)
		if svc != "clickhouse" || port != "9000" {
			t.Errorf("%s: clickhouse addr %s, want clickhouse:9000 (the service's native port)", host, a)
		}
	}

	// Every route reads a subscribed topic into a table the init script creates.
	initSQL, err := os.ReadFile(filepath.FromSlash(mounts(c.Services["clickhouse"])["/docker-entrypoint-initdb.d/init.sql"]))
	if err != nil {
		t.Fatalf("clickhouse init script: %v", err)
	}
	if len(cfg.Routes) == 0 {
		t.Errorf("%s: no routes", host)
	}
	for _, r := range cfg.Routes {
		if !slices.Contains(cfg.Kafka.Topics, r.Topic) {
			t.Errorf("%s: route topic %q not in kafka.topics %v", host, r.Topic, cfg.Kafka.Topics)
		}
		table := fmt.Sprintf("%s.%s", cfg.ClickHouse.Database, r.Table)
		if !strings.Contains(string(initSQL), "CREATE TABLE IF NOT EXISTS "+table) {
			t.Errorf("route table %s is not created by the clickhouse init script", table)
		}
	}

	// The sink's HTTP port is published.
	_, port := splitAddr(t, cfg.HTTP.Listen)
	if got := published(t, "sink", c.Services["sink"]); got[port] != port {
		t.Errorf("sink: http.listen port %s is not published (ports %v)", port, c.Services["sink"].Ports)
	}
}

func splitAddr(t *testing.T, addr string) (host, port string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("address %q: %v", addr, err)
	}
	return host, port
}

// listenerOnPort returns the name of the listener in a KAFKA_LISTENERS value
// ("NAME://host:port,...") that binds port.
func listenerOnPort(listeners, port string) string {
	for _, l := range strings.Split(listeners, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(l), "://")
		if ok && strings.HasSuffix(addr, ":"+port) {
			return name
		}
	}
	return ""
}

// advertised returns the host:port a KAFKA_ADVERTISED_LISTENERS value gives for
// the named listener.
func advertised(listeners, name string) string {
	for _, l := range strings.Split(listeners, ",") {
		n, addr, ok := strings.Cut(strings.TrimSpace(l), "://")
		if ok && n == name {
			return addr
		}
	}
	return ""
}
