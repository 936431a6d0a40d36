package main

import "testing"

// The registry-format variants' generated configs are valid sink configs
// that name the format and the registry.
func TestRegistryVariantConfigs(t *testing.T) {
	for key, f := range registryFormats {
		if variantName(key) == key {
			t.Errorf("variant %s has no name", key)
		}
		sc := sinkConf{name: "x", group: "g", topic: "t", table: "tbl", brokers: []string{"127.0.0.1:9092"},
			chAddrs: []string{"127.0.0.1:9000"}, format: f, registry: "http://127.0.0.1:8081/apis/ccompat/v7"}
		cfg, err := sc.parse()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if string(cfg.Routes[0].Format) != f || len(cfg.SchemaRegistry.URLs) != 1 {
			t.Fatalf("%s: route format %s, registry %v", key, cfg.Routes[0].Format, cfg.SchemaRegistry.URLs)
		}
	}
}
