package config

import (
	"fmt"
	"testing"
)

// TestRouteMessage: a protobuf route may name the message type it reads;
// other formats may not, and the name must be a Protobuf full name.
func TestRouteMessage(t *testing.T) {
	const cfg = "name: t\nkafka: {brokers: [k:9092], topics: [a]}\nroutes: [{topic: a, table: a, format: %s, message: %q}]\n"
	reg := []string{"SINK_SCHEMA_REGISTRY__URLS=http://127.0.0.1:8081"}
	for _, c := range []struct{ format, message, want string }{
		{"protobuf", "shop.v1.Order", ""},
		{"protobuf", "Order", ""},
		{"protobuf", "shop..Order", `config: routes[0].message: "shop..Order" is not a Protobuf full name such as my.pkg.Event`},
		{"avro", "shop.Order", "config: routes[0].message: only for format protobuf (a Protobuf topic's message type)"},
		{"json", "shop.Order", "config: routes[0].message: only for format protobuf (a Protobuf topic's message type)"},
	} {
		c2, err := Parse([]byte(fmt.Sprintf(cfg, c.format, c.message)), reg)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v", c.format, c.message, err)
		case c.want == "" && c2.Routes[0].Message != c.message:
			t.Errorf("%s %s: parsed message %q", c.format, c.message, c2.Routes[0].Message)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%s %s: got %v\nwant %s", c.format, c.message, err, c.want)
		}
	}
}
