package sink_test

// docker-compose.yml and the Dockerfile cannot run on the project's machines (no
// Docker engine), so these tests check, by reading the files, what would
// otherwise only fail on a user's laptop: the services exist, the published
// ports are the local stack's, every mounted host file exists, the sink's
// config points at the compose services on the ports they listen on, the
// one-shot init services create what the routes need before the sink starts,
// every long-running service has a health check, and the Dockerfile builds a
// static, version-stamped binary that runs as a non-root user.

import (
	"debug/elf"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"sink/config"
	"sink/internal/metrics"
)

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Entrypoint      []string `yaml:"entrypoint"`
	Command         []string `yaml:"command"`
	Restart         string   `yaml:"restart"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	Healthcheck     *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
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

// initServices are the one-shot services that prepare the sink's topic and
// table.
var initServices = []string{"init-topic", "init-table"}

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
	for _, name := range append([]string{"kafka", "clickhouse", "sink"}, initServices...) {
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

	// Every route reads a subscribed topic, created by init-topic, into a
	// table the init-table script creates.
	initSQL := initTableSQL(t, c)
	created := initTopics(t, c)
	if len(cfg.Routes) == 0 {
		t.Errorf("%s: no routes", host)
	}
	for _, r := range cfg.Routes {
		if !slices.Contains(cfg.Kafka.Topics, r.Topic) {
			t.Errorf("%s: route topic %q not in kafka.topics %v", host, r.Topic, cfg.Kafka.Topics)
		}
		if !slices.Contains(created, r.Topic) {
			t.Errorf("route topic %q is not created by init-topic (creates %v)", r.Topic, created)
		}
		table := fmt.Sprintf("%s.%s", cfg.ClickHouse.Database, r.Table)
		if !strings.Contains(initSQL, "CREATE TABLE IF NOT EXISTS "+table) {
			t.Errorf("route table %s is not created by the init-table script", table)
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

// initTableSQL is the script init-table runs: its --queries-file, mounted from
// the repository.
func initTableSQL(t *testing.T, c composeFile) string {
	t.Helper()
	s := c.Services["init-table"]
	i := slices.Index(s.Entrypoint, "--queries-file")
	if i < 0 || i+1 >= len(s.Entrypoint) || s.Entrypoint[0] != "clickhouse-client" {
		t.Fatalf("init-table: entrypoint %q does not run clickhouse-client --queries-file FILE", s.Entrypoint)
	}
	if h := flagValue(s.Entrypoint, "--host"); h != "clickhouse" {
		t.Errorf("init-table: --host %q, want the clickhouse service", h)
	}
	host, ok := mounts(s)[s.Entrypoint[i+1]]
	if !ok {
		t.Fatalf("init-table: %s is not mounted from the repository", s.Entrypoint[i+1])
	}
	data, err := os.ReadFile(filepath.FromSlash(host))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// initTopics are the topics init-topic creates (one --topic per run).
func initTopics(t *testing.T, c composeFile) []string {
	t.Helper()
	s := c.Services["init-topic"]
	args := append(slices.Clone(s.Entrypoint), s.Command...)
	if len(args) == 0 || !strings.HasSuffix(args[0], "kafka-topics.sh") || !slices.Contains(args, "--create") || !slices.Contains(args, "--if-not-exists") {
		t.Fatalf("init-topic: %q does not run kafka-topics.sh --create --if-not-exists", args)
	}
	// The bootstrap server is a listener inside the compose network.
	k := c.Services["kafka"]
	svc, port, err := net.SplitHostPort(flagValue(args, "--bootstrap-server"))
	if err != nil || svc != "kafka" || listenerOnPort(k.Environment["KAFKA_LISTENERS"], port) == "" {
		t.Errorf("init-topic: --bootstrap-server %q is not a kafka listener (%v)", flagValue(args, "--bootstrap-server"), err)
	}
	if p, err := strconv.Atoi(flagValue(args, "--partitions")); err != nil || p < 1 {
		t.Errorf("init-topic: --partitions %q", flagValue(args, "--partitions"))
	}
	return []string{flagValue(args, "--topic")}
}

func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestComposeStartOrderAndHealth: the long-running services have health
// checks; the init services run once, after what they prepare is healthy
// (with the same images); the sink starts after both completed, its health
// check is the sink's own /readyz on http.listen, and Docker waits out its
// shutdown_timeout before killing it.
func TestComposeStartOrderAndHealth(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"kafka", "clickhouse", "sink"} {
		if h := c.Services[name].Healthcheck; h == nil || len(h.Test) == 0 {
			t.Errorf("service %s has no healthcheck", name)
		}
	}
	prepares := map[string]string{"init-topic": "kafka", "init-table": "clickhouse"}
	for _, name := range initServices {
		s := c.Services[name]
		if s.Restart != "no" {
			t.Errorf("%s: restart %q; a one-shot service needs restart: \"no\"", name, s.Restart)
		}
		dep := prepares[name]
		if s.DependsOn[dep].Condition != "service_healthy" {
			t.Errorf("%s: depends_on %s %+v; want condition service_healthy", name, dep, s.DependsOn)
		}
		if s.Image != c.Services[dep].Image {
			t.Errorf("%s: image %q, want %s's %q (its client matches its server)", name, s.Image, dep, c.Services[dep].Image)
		}
		if sink := c.Services["sink"]; sink.DependsOn[name].Condition != "service_completed_successfully" {
			t.Errorf("sink: depends_on %s %+v; want condition service_completed_successfully", name, sink.DependsOn)
		}
	}

	sink := c.Services["sink"]
	cfg, err := config.Load(filepath.FromSlash(mounts(sink)[sinkConfigPath]), nil)
	if err != nil {
		t.Fatal(err)
	}
	test := sink.Healthcheck.Test
	u, err := url.Parse(test[len(test)-1])
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("sink healthcheck %q: want a URL on 127.0.0.1 last", test)
	}
	if _, port, _ := net.SplitHostPort(cfg.HTTP.Listen); u.Port() != port {
		t.Errorf("sink healthcheck port %s, http.listen is %s", u.Port(), cfg.HTTP.Listen)
	}
	if u.Path != "/readyz" {
		t.Errorf("sink healthcheck path %s, want /readyz", u.Path)
	}
	// The sink serves that path, answering 503 until it has joined.
	m := metrics.New(cfg.Kafka.Group)
	srv, err := metrics.Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(t.Context())
	resp, err := http.Get("http://" + srv.Addr() + u.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET %s before joining: %s; want 503 (so the health check fails until ready)", u.Path, resp.Status)
	}

	grace, err := time.ParseDuration(sink.StopGracePeriod)
	if err != nil || grace <= cfg.ShutdownTimeout {
		t.Errorf("sink: stop_grace_period %q must exceed shutdown_timeout %v (Docker's default is 10s)", sink.StopGracePeriod, cfg.ShutdownTimeout)
	}
}

// TestDockerfile: multi-stage, the binary built static (CGO off) with the
// version stamped, a non-root numeric USER, and `sink run --config
// /etc/sink/config.yaml` as the default command (TestDockerfileBuildIsStatic
// runs the build).
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?`).FindAllStringSubmatch(df, -1)
	if len(froms) < 2 || froms[0][2] == "" {
		t.Fatalf("Dockerfile: want a named build stage and a runtime stage, got %q", froms)
	}
	if !regexp.MustCompile(`COPY --from=` + froms[0][2] + `\s`).MatchString(df) {
		t.Errorf("Dockerfile: the runtime stage does not copy from the %s stage", froms[0][2])
	}
	build := regexp.MustCompile(`(?m)^RUN\s+(.*go build.*)$`).FindStringSubmatch(df)
	if build == nil {
		t.Fatal("Dockerfile: no RUN ... go build")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-X main.version=${VERSION}", "./cmd/sink"} {
		if !strings.Contains(build[1], want) {
			t.Errorf("Dockerfile build %q lacks %q", build[1], want)
		}
	}
	if !regexp.MustCompile(`(?m)^ARG VERSION`).MatchString(df) {
		t.Error("Dockerfile: no ARG VERSION")
	}
	users := regexp.MustCompile(`(?m)^USER\s+(\d+)(?::(\d+))?\s*$`).FindAllStringSubmatch(df, -1)
	if len(users) == 0 || users[len(users)-1][1] == "0" {
		t.Errorf("Dockerfile: want a numeric non-root USER last (Kubernetes' runAsNonRoot checks the number), got %q", users)
	}
	if !strings.Contains(df, `CMD ["run", "--config", "`+sinkConfigPath+`"]`) {
		t.Errorf("Dockerfile: CMD is not run --config %s", sinkConfigPath)
	}
	if !strings.Contains(df, `ENTRYPOINT ["/usr/local/bin/sink"]`) {
		t.Error("Dockerfile: ENTRYPOINT is not the sink binary")
	}
	// main.version is what -X sets.
	main, err := os.ReadFile("cmd/sink/main.go")
	if err != nil || !regexp.MustCompile(`(?m)^var version = `).Match(main) {
		t.Fatalf("cmd/sink/main.go has no package-level var version (%v)", err)
	}
}

// TestDockerfileBuildIsStatic runs the Dockerfile's build command itself:
// the binary has no dynamic loader or shared libraries, and `sink version`
// prints the stamped version. It compiles and links the whole binary
// again (with -trimpath, so the test builds' cache does not serve it): the
// slowest test that needs no stack, so `make unit` (-short) leaves it to
// `make test`.
func TestDockerfileBuildIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the release build of the binary runs in make test")
	}
	bin := filepath.Join(t.TempDir(), "sink")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=compose-test-1", "-o", bin, "./cmd/sink")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) != 0 {
		t.Errorf("the binary needs shared libraries %v (%v): not static", libs, err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "sink compose-test-1" {
		t.Errorf("sink version: %q, %v; want \"sink compose-test-1\"", out, err)
	}
}
