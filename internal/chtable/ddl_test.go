package chtable

import (
	"strings"
	"testing"

	"sink/internal/chschema"
)

func TestCreateTableDDL(t *testing.T) {
	// chschema.QuoteIdent escapes the space of "the name".
	cols := []chschema.ColumnSchema{{Name: "id", Type: "Int64"}, {Name: "the name", Type: "String"}}
	for _, tc := range []struct {
		name string
		spec TableSpec
		want []string
	}{
		{"replacing", TableSpec{Database: "db", Table: "t", Columns: cols, Replacing: true, Version: "_offset", OrderBy: "id"},
			[]string{"CREATE TABLE IF NOT EXISTS `db`.`t` (`id` Int64, `the\\x20name` String) ENGINE = ReplacingMergeTree(`_offset`) ORDER BY id"}},
		{"merge tree with partition and settings", TableSpec{Database: "db", Table: "t", Columns: cols, OrderBy: "(id)", PartitionBy: "toYYYYMM(ts)",
			Settings: map[string]any{"storage_policy": "it's", "index_granularity": 1024, "flag": true, "ratio": 0.5}},
			[]string{"CREATE TABLE IF NOT EXISTS `db`.`t` (`id` Int64, `the\\x20name` String) ENGINE = MergeTree() PARTITION BY toYYYYMM(ts) ORDER BY (id)" +
				" SETTINGS flag = 1, index_granularity = 1024, ratio = 0.5, storage_policy = 'it\\'s'"}},
		{"a column with its source's default", TableSpec{Database: "db", Table: "t", Columns: []chschema.ColumnSchema{{Name: "id", Type: "Int64"},
			{Name: "tier", Type: "Int32", DefaultExpr: "7"}}, OrderBy: "id"},
			[]string{"CREATE TABLE IF NOT EXISTS `db`.`t` (`id` Int64, `tier` Int32 DEFAULT 7) ENGINE = MergeTree() ORDER BY id"}},
		{"cluster", TableSpec{Database: "db", Table: "t", Columns: cols, Replacing: true, Version: "_offset", OrderBy: "id", Cluster: "sink_cluster"},
			[]string{
				"CREATE TABLE IF NOT EXISTS `db`.`t_local` ON CLUSTER `sink_cluster` (`id` Int64, `the\\x20name` String) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db.t_local', '{replica}', `_offset`) ORDER BY id",
				"CREATE TABLE IF NOT EXISTS `db`.`t` ON CLUSTER `sink_cluster` AS `db`.`t_local` ENGINE = Distributed('sink_cluster', 'db', 't_local', rand())",
			}},
		{"cluster merge tree", TableSpec{Database: "db", Table: "t", Columns: cols, OrderBy: "id", Cluster: "c"},
			[]string{
				"CREATE TABLE IF NOT EXISTS `db`.`t_local` ON CLUSTER `c` (`id` Int64, `the\\x20name` String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/db.t_local', '{replica}') ORDER BY id",
				"CREATE TABLE IF NOT EXISTS `db`.`t` ON CLUSTER `c` AS `db`.`t_local` ENGINE = Distributed('c', 'db', 't_local', rand())",
			}},
	} {
		got, err := CreateTableDDL(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		spec TableSpec
		want string
	}{
		{TableSpec{Database: "db", Table: "t", OrderBy: "id"}, "no columns to create db.t with"},
		{TableSpec{Database: "db", Table: "t", Columns: cols}, "no ORDER BY expression"},
		{TableSpec{Database: "db", Table: "t", Columns: []chschema.ColumnSchema{{Name: "a`b", Type: "String"}}, OrderBy: "id"}, "cannot be inserted into"},
		{TableSpec{Database: "db", Table: "t", Columns: cols, OrderBy: "id", Settings: map[string]any{"a": []int{1}}}, "setting a: [1] ([]int) is not a number"},
	} {
		if _, err := CreateTableDDL(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v; want %q", tc.spec, err, tc.want)
		}
	}
}

func TestKafkaColumns(t *testing.T) {
	if got := KafkaColumns(chschema.ServerTypes{})[3].Type; got != "DateTime" {
		t.Errorf("_timestamp without DateTime64: %s", got)
	}
	if got := KafkaColumns(chschema.ServerTypes{DateTime64: true})[3].Type; got != "DateTime64(3)" {
		t.Errorf("_timestamp with DateTime64: %s", got)
	}
}
