package config

import (
	"strings"
	"testing"
)

func TestClusterValidation(t *testing.T) {
	const head = "name: t\nkafka: {topics: [orders]}\n"
	for _, tc := range []struct {
		ch, routes string
		want       string // "": valid
	}{
		{`{cluster: c}`, `[{topic: orders, table: o, target: local, sharding_key: id}]`, ""},
		{`{cluster: c}`, `[{topic: orders, table: o, target: local, sharding: random}]`, ""},
		{`{cluster: c}`, `[{topic: orders, table: o, target: distributed}]`, ""},
		{`{shards: [[a:1, b:1], [c:1]], insert_quorum: 1, insert_quorum_timeout: 5s}`, `[{topic: orders, table: o, target: local, sharding_key: id, sharding_hash: identity}]`, ""},
		{`{}`, `[{topic: orders, table: o, target: local, sharding: random}]`, "routes[0].target: local writes each shard's table, so clickhouse.cluster or clickhouse.shards is required"},
		{`{cluster: c}`, `[{topic: orders, table: o, target: remote}]`, `routes[0].target: "remote" is not one of distributed, local`},
		{`{cluster: c}`, `[{topic: orders, table: o, target: local}]`, "routes[0]: target local needs sharding: random or sharding_key: COLUMN"},
		{`{cluster: c}`, `[{topic: orders, table: o, target: local, sharding: rand}]`, `routes[0].sharding: "rand" is not random`},
		{`{cluster: c}`, `[{topic: orders, table: o, target: local, sharding: random, sharding_key: id}]`, "routes[0]: sharding random places whole batches"},
		{`{cluster: c}`, `[{topic: orders, table: o, target: local, sharding_key: id, sharding_hash: sipHash64}]`, `routes[0].sharding_hash: "sipHash64" is not one of cityHash64, xxHash64, murmurHash3_64, intHash64, identity`},
		{`{cluster: c}`, `[{topic: orders, table: o, target: distributed, sharding_key: id}]`, "routes[0]: target distributed: the Distributed table's own sharding key places rows"},
		{`{cluster: c}`, `[{topic: orders, table: o, sharding: random}]`, "routes[0]: sharding, sharding_key and sharding_hash need target: local"},
		{`{cluster: c}`, `[{topic: orders, table: o, target: local, sharding: random, when: {key: a}}, {topic: orders, table: o, target: distributed, when: {key: b}}]`,
			"routes[1]: writes default.o like routes[0] but with another target or sharding"},
		{`{shards: [[a:1], []]}`, `[{topic: orders, table: o}]`, "clickhouse.shards[1]: a shard needs at least one replica"},
		{`{shards: [[a:1], [a:1]]}`, `[{topic: orders, table: o}]`, `clickhouse.shards[1][0]: "a:1" is already clickhouse.shards[0][0]`},
		{`{shards: [[a]]}`, `[{topic: orders, table: o}]`, `clickhouse.shards[0][0]: "a" is not host:port`},
		{`{shards: [[a:1, b:1]], insert_quorum: 3}`, `[{topic: orders, table: o}]`, "clickhouse.settings.insert_quorum (3) is more than the 2 replicas of a shard"},
		{`{insert_quorum: -1}`, `[{topic: orders, table: o}]`, "clickhouse.insert_quorum (-1) must be 0"},
		{`{insert_quorum_timeout: -1s}`, `[{topic: orders, table: o}]`, "clickhouse.insert_quorum_timeout (-1s) must be 0"},
		{`{shards: [[a:1, b:1]], replica_order: in_order}`, `[{topic: orders, table: o, target: local, sharding: random}]`, ""},
		{`{shards: [[a:1, b:1]], replica_order: random}`, `[{topic: orders, table: o, target: local, sharding: random}]`, ""},
		{`{shards: [[a:1, b:1]], schema_agreement_timeout: 0s}`, `[{topic: orders, table: o}]`, "clickhouse.schema_agreement_timeout (0s) must be positive"},
		{`{shards: [[a:1, b:1]], replica_order: least_loaded}`, `[{topic: orders, table: o}]`, `clickhouse.replica_order "least_loaded": want round_robin, in_order or random`},
		{"{cluster: c}\ndelivery: exactly_once", `[{topic: orders, table: o, target: distributed}]`, "routes[0]: delivery exactly_once with target distributed is not supported"},
		{"{cluster: c}\ndelivery: exactly_once", `[{topic: orders, table: o, target: local, sharding: random}]`, "routes[0]: delivery exactly_once with sharding random"},
		{"{cluster: c}\ndelivery: exactly_once", `[{topic: orders, table: o, target: local, sharding_key: id}]`, ""},
		{`{shards: [[a:1, b:1]], settings: {insert_quorum: 3}}`, `[{topic: orders, table: o}]`, "clickhouse.settings.insert_quorum (3) is more than the 2 replicas of a shard"},
		{`{insert_quorum: 2, settings: {insert_quorum: 3}}`, `[{topic: orders, table: o}]`, "clickhouse.insert_quorum (2) and clickhouse.settings.insert_quorum (3) differ"},
	} {
		yaml := head + "clickhouse: " + tc.ch + "\nroutes: " + tc.routes + "\n"
		c, err := Parse([]byte(yaml), nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v", tc.ch, tc.routes, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: error %v; want %q", tc.ch, tc.routes, err, tc.want)
		case tc.want == "" && c.Routes[0].Target == TargetLocal && c.Routes[0].ShardingKey != "" && c.Routes[0].Hash() == "":
			t.Errorf("%s: no hash", tc.routes)
		}
	}
}
