package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"
)

// The docs sections that errors and warnings point to, for what they do not
// say in one line.
const (
	// DeprecatedDoc lists the deprecated keys.
	DeprecatedDoc = "docs/operations.md#deprecated-keys"
	// cdcDoc explains truncate: apply and its limits.
	cdcDoc = "docs/formats.md#change-data-capture"
	// createDoc explains schema.create: if_missing.
	createDoc = "docs/evolution.md#creating-missing-tables-schemacreate-if_missing"
)

// deprecation is a key the sink still accepts, from the file or the
// environment, but no longer documents: either another key says the same
// (replacement), or the sink derives the value itself (replacement "", and
// reason says what it does with a value still set).
type deprecation struct {
	key         string
	replacement string
	reason      string
	// value turns the old key's value into the replacement's; ok false
	// means the old value asks for nothing (the server's setting).
	value func(v any) (nv any, ok bool, err error)
	// hint, when set, adds what to write instead, worked out from the
	// config's values ("" when it cannot).
	hint func(ko *koanf.Koanf) string
}

// deprecations are the deprecated keys, in the order their warnings are
// printed.
var deprecations = []deprecation{
	{key: "kafka.fetch_max_bytes", reason: "the sink sizes fetches from batch.buffer_memory; a smaller value still lowers them"},
	{key: "kafka.max_partition_fetch_bytes", reason: "the sink sizes fetches from batch.buffer_memory; a smaller value still lowers them"},
	{key: "batch.max_wait", reason: "set batch.max_latency instead, the one latency knob (a fixed-mode batch waits max_latency less kafka.fetch_max_wait); the value set is still the batch's wait", hint: maxWaitHint},
	{key: "clickhouse.insert_quorum", replacement: "clickhouse.settings.insert_quorum", value: quorumValue},
	{key: "clickhouse.insert_quorum_timeout", replacement: "clickhouse.settings.insert_quorum_timeout", value: quorumTimeoutValue},
}

// applyDeprecations moves every deprecated key set in ko onto its
// replacement and returns one warning per such key (naming the environment
// variable when one set it). A key whose replacement is set to another value
// is an error naming both.
func applyDeprecations(ko *koanf.Koanf, envKeys map[string]string) (warnings []string, errs []error) {
	for _, d := range deprecations {
		if !ko.Exists(d.key) {
			continue
		}
		from := ""
		if name, ok := envKeys[d.key]; ok {
			from = " (from " + name + ")"
		}
		if d.replacement == "" {
			reason := d.reason
			if d.hint != nil {
				if h := d.hint(ko); h != "" {
					reason += "; " + h
				}
			}
			warnings = append(warnings, fmt.Sprintf("%s%s is deprecated: %s (%s)", d.key, from, reason, DeprecatedDoc))
			continue
		}
		warnings = append(warnings, fmt.Sprintf("%s%s is deprecated: set %s instead (%s)", d.key, from, d.replacement, DeprecatedDoc))
		old := ko.Get(d.key)
		ko.Delete(d.key)
		nv, ok, err := d.value(old)
		if err != nil {
			sep := ": "
			if strings.HasPrefix(err.Error(), "(") {
				sep = " " // "key (-1) must be …"
			}
			errs = append(errs, fmt.Errorf("%s%s%w%s", d.key, sep, err, from))
			continue
		}
		if !ok {
			continue
		}
		if ko.Exists(d.replacement) {
			if cur := ko.Get(d.replacement); strings.TrimSpace(fmt.Sprint(cur)) != fmt.Sprint(nv) {
				errs = append(errs, fmt.Errorf("%s (%v) and %s (%v) differ: set only %s", d.key, old, d.replacement, cur, d.replacement))
			}
			continue
		}
		if err := ko.Set(d.replacement, nv); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.key, err))
		}
	}
	return warnings, errs
}

// maxWaitHint names the batch.max_latency that gives a fixed-mode batch
// the wait batch.max_wait sets: the wait plus kafka.fetch_max_wait.
func maxWaitHint(ko *koanf.Koanf) string {
	w, err := decodeHook(nil, durationType, ko.Get("batch.max_wait"))
	if err != nil {
		return ""
	}
	fetch := any(defaultFetchMaxWait)
	if ko.Exists("kafka.fetch_max_wait") {
		fetch = ko.Get("kafka.fetch_max_wait")
	}
	f, err := decodeHook(nil, durationType, fetch)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("the same wait in fixed mode is batch.max_latency: %v", w.(time.Duration)+f.(time.Duration))
}

// quorumValue reads clickhouse.insert_quorum: a number of replicas, 0 for
// the server's setting.
func quorumValue(v any) (any, bool, error) {
	n, ok := settingInt(v)
	if !ok {
		return nil, false, fmt.Errorf("invalid integer %q", fmt.Sprint(v))
	}
	if n < 0 {
		return nil, false, fmt.Errorf("(%d) must be 0 (the server's setting) or a number of replicas", n)
	}
	return n, n > 0, nil
}

// quorumTimeoutValue reads clickhouse.insert_quorum_timeout, a duration, as
// the setting's milliseconds; 0 is the server's setting.
func quorumTimeoutValue(v any) (any, bool, error) {
	d, err := decodeHook(nil, durationType, v)
	if err != nil {
		return nil, false, err
	}
	ms := d.(time.Duration).Milliseconds()
	if ms < 0 {
		return nil, false, fmt.Errorf("(%v) must be 0 (the server's setting) or positive", d)
	}
	return int(ms), ms > 0, nil
}
