package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"time"

	"sink/internal/offsets"
)

// Kafka Connect's REST resources beyond the status, in its JSON shapes, so
// that a script written for a Connect worker reads and drives the sink
// unchanged: the connector list (with ?expand=status|info), the
// connector's info, config and tasks, and its offsets (KIP-875). The
// reads are open like GET /status; PATCH and DELETE of the offsets are
// admin endpoints like pause and stop.

// Offset is one partition's offset as Kafka Connect's offsets API shows a
// sink connector's: the topic and partition, and the offset of the next
// record to consume. Reset, in a PATCH (a null offset), asks for the
// partition to start over where kafka.start_offset says instead.
type Offset struct {
	Topic     string
	Partition int32
	Offset    int64
	Reset     bool
}

// TP is the offset's partition.
func (o Offset) TP() offsets.TP { return offsets.TP{Topic: o.Topic, Partition: o.Partition} }

// The JSON of GET and PATCH /connectors/NAME/offsets.
type (
	connectOffsets struct {
		Offsets []connectOffset `json:"offsets"`
	}
	connectOffset struct {
		Partition connectPartition `json:"partition"`
		Offset    *connectPosition `json:"offset"`
	}
	connectPartition struct {
		Topic     string `json:"kafka_topic"`
		Partition int32  `json:"kafka_partition"`
	}
	connectPosition struct {
		Offset int64 `json:"kafka_offset"`
	}
)

// offsetsJSON is offs in Kafka Connect's shape.
func offsetsJSON(offs []Offset) connectOffsets {
	out := connectOffsets{Offsets: make([]connectOffset, 0, len(offs))}
	for _, o := range offs {
		c := connectOffset{Partition: connectPartition{Topic: o.Topic, Partition: o.Partition}}
		if !o.Reset {
			c.Offset = &connectPosition{Offset: o.Offset}
		}
		out.Offsets = append(out.Offsets, c)
	}
	return out
}

// ParseOffsets reads the body of PATCH /connectors/NAME/offsets as Kafka
// Connect reads a sink connector's: {"offsets": [{"partition":
// {"kafka_topic": T, "kafka_partition": P}, "offset": {"kafka_offset":
// O}}]}, where P and O are integers or strings holding one (O at least 0)
// and a null or missing offset resets the partition. A partition given
// twice takes its last offset, as in Connect. The errors wrap
// ErrBadRequest and say what is wrong in Connect's words.
func ParseOffsets(body []byte) ([]Offset, error) {
	var req struct {
		Offsets []struct {
			Partition map[string]json.RawMessage `json:"partition"`
			Offset    map[string]json.RawMessage `json:"offset"`
		} `json:"offsets"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("%w: the body is not {\"offsets\": [{\"partition\": {...}, \"offset\": {...}}, ...]}: %v", ErrBadRequest, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: the body holds more than one JSON value", ErrBadRequest)
	}
	if len(req.Offsets) == 0 {
		return nil, fmt.Errorf("%w: Partitions / offsets need to be provided for an alter offsets request", ErrBadRequest)
	}
	last := map[offsets.TP]int{}
	var out []Offset
	for _, e := range req.Offsets {
		o, err := parseOffset(e.Partition, e.Offset)
		if err != nil {
			return nil, err
		}
		if i, ok := last[o.TP()]; ok {
			out[i] = o
			continue
		}
		last[o.TP()] = len(out)
		out = append(out, o)
	}
	return out, nil
}

// parseOffset reads one entry of a PATCH's offsets.
func parseOffset(partition, offset map[string]json.RawMessage) (Offset, error) {
	var o Offset
	if partition == nil {
		return o, fmt.Errorf("%w: The partition for a sink connector offset cannot be null or missing", ErrBadRequest)
	}
	topic, tok := partition["kafka_topic"]
	part, pok := partition["kafka_partition"]
	if !tok || !pok {
		return o, fmt.Errorf("%w: The partition for a sink connector offset must contain the keys 'kafka_topic' and 'kafka_partition'", ErrBadRequest)
	}
	if err := json.Unmarshal(topic, &o.Topic); err != nil || o.Topic == "" {
		return o, fmt.Errorf("%w: kafka_topic %s: want the name of a topic, as a string", ErrBadRequest, topic)
	}
	p, err := jsonInt(part, 32)
	if err != nil || p < 0 {
		return o, fmt.Errorf("%w: Failed to parse the following Kafka partition value in the provided offsets: '%s'. Partition values for sink connectors need to be integers (0 or more).", ErrBadRequest, unquote(part))
	}
	o.Partition = int32(p)
	if offset == nil {
		o.Reset = true
		return o, nil
	}
	raw, ok := offset["kafka_offset"]
	if !ok {
		return o, fmt.Errorf("%w: The offset for a sink connector should either be null or contain the key 'kafka_offset'", ErrBadRequest)
	}
	if o.Offset, err = jsonInt(raw, 64); err != nil || o.Offset < 0 {
		return o, fmt.Errorf("%w: Failed to parse the following Kafka offset value in the provided offsets: '%s'. Offset values for sink connectors need to be integers (0 or more).", ErrBadRequest, unquote(raw))
	}
	return o, nil
}

// jsonInt reads a JSON integer, or a JSON string holding one, of bits
// bits (a fraction or an exponent is not an integer).
func jsonInt(raw json.RawMessage, bits int) (int64, error) {
	return strconv.ParseInt(unquote(raw), 10, bits)
}

// unquote is a JSON string's text, or raw's own text for another value.
func unquote(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// offsetsBodyLimit bounds a PATCH body: a thousand partitions take less
// than 100 KiB.
const offsetsBodyLimit = 1 << 20

// offsetsTimeout bounds an offsets change: reading the partitions,
// deleting the rows a reload replaces (a mutation ClickHouse may take a
// while over), committing. The answer's write deadline moves past it.
const offsetsTimeout = 5 * time.Minute

// offsetsEndpoint serves /connectors/NAME/offsets: GET (open, like the
// status), PATCH and DELETE (admin endpoints).
func (h *Handler) offsetsEndpoint() http.HandlerFunc {
	alter, reset := h.admin(http.MethodPatch, alterOp), h.admin(http.MethodDelete, resetOp)
	return func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPatch:
			alter(w, r)
		case http.MethodDelete:
			reset(w, r)
		default:
			h.getOffsets(w, r)
		}
	}
}

// readWait bounds a read that asks Kafka (GET offsets), within the
// server's write timeout.
const readWait = 20 * time.Second

func (h *Handler) getOffsets(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead, http.MethodPatch, http.MethodDelete) {
		return
	}
	lc, ok := h.lifecycle(w)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readWait)
	defer cancel()
	offs, err := lc.Offsets(ctx)
	if err != nil {
		h.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, offsetsJSON(offs))
}

// lifecycle is the controller as a Lifecycle, or false once it answered
// why there is none (starting; a controller that cannot stop in place).
func (h *Handler) lifecycle(w http.ResponseWriter) (Lifecycle, bool) {
	c := h.ctl.Load()
	if c == nil {
		writeError(w, http.StatusConflict, "the connector is starting; try again once /status says RUNNING")
		return nil, false
	}
	lc, ok := (*c).(Lifecycle)
	if !ok {
		writeError(w, http.StatusConflict, "this connector's offsets are not served here")
	}
	return lc, ok
}

// alterOp is PATCH /connectors/NAME/offsets: a JSON body (415 for another
// type, as Connect answers), its offsets set.
func alterOp(w http.ResponseWriter, r *http.Request, c Controller) (int, any, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return 0, nil, errUnsupportedMedia
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, offsetsBodyLimit))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err)
	}
	offs, err := ParseOffsets(body)
	if err != nil {
		return 0, nil, err
	}
	return offsetsChange(w, r, c, func(lc Lifecycle, ctx context.Context) error { return lc.AlterOffsets(ctx, offs) },
		"The offsets for this connector have been altered successfully")
}

// resetOp is DELETE /connectors/NAME/offsets.
func resetOp(w http.ResponseWriter, r *http.Request, c Controller) (int, any, error) {
	return offsetsChange(w, r, c, Lifecycle.ResetOffsets, "The offsets for this connector have been reset successfully")
}

// offsetsChange runs change for up to offsetsTimeout, the answer's write
// deadline moved past it, and answers 200 with Connect's message.
func offsetsChange(w http.ResponseWriter, r *http.Request, c Controller, change func(Lifecycle, context.Context) error, done string) (int, any, error) {
	lc, ok := c.(Lifecycle)
	if !ok {
		return 0, nil, fmt.Errorf("%w: this connector's offsets cannot be changed here", ErrConflict)
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(offsetsTimeout + profileSlack))
	ctx, cancel := context.WithTimeout(r.Context(), offsetsTimeout)
	defer cancel()
	if err := change(lc, ctx); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]string{"message": done}, nil
}

// errUnsupportedMedia is a PATCH whose body is not JSON.
var errUnsupportedMedia = errors.New("the body must be JSON (Content-Type: application/json)")

// connectorInfo is GET /connectors/NAME: its name, config and tasks.
type connectorInfo struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
	Tasks  []taskID          `json:"tasks"`
	Type   string            `json:"type"`
}

type taskID struct {
	Connector string `json:"connector"`
	Task      int    `json:"task"`
}

// taskInfo is one entry of GET /connectors/NAME/tasks.
type taskInfo struct {
	ID     taskID            `json:"id"`
	Config map[string]string `json:"config"`
}

// config is the connector's config for the Connect shapes: Info.Config,
// or just its name.
func (h *Handler) config() map[string]string {
	if h.info.Config == nil {
		return map[string]string{"name": h.info.Name}
	}
	return h.info.Config
}

// tasks are the connector's task ids: one, or none while STOPPED.
func (h *Handler) tasks() []taskID {
	if h.snapshot().State == Stopped {
		return []taskID{}
	}
	return []taskID{{Connector: h.info.Name, Task: 0}}
}

func (h *Handler) infoBody() connectorInfo {
	return connectorInfo{Name: h.info.Name, Config: h.config(), Tasks: h.tasks(), Type: "sink"}
}

func (h *Handler) getInfo(w http.ResponseWriter, r *http.Request) {
	if allow(w, r, http.MethodGet, http.MethodHead) {
		writeJSON(w, http.StatusOK, h.infoBody())
	}
}

func (h *Handler) getConfig(w http.ResponseWriter, r *http.Request) {
	if allow(w, r, http.MethodGet, http.MethodHead) {
		writeJSON(w, http.StatusOK, h.config())
	}
}

// getTasks serves the tasks with their config, which is the connector's
// with task.class, as Connect's.
func (h *Handler) getTasks(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	out := []taskInfo{}
	for _, id := range h.tasks() {
		cfg := maps.Clone(h.config())
		cfg["task.class"] = cfg["connector.class"]
		out = append(out, taskInfo{ID: id, Config: cfg})
	}
	writeJSON(w, http.StatusOK, out)
}

// connectors is GET /connectors: the one name, or with ?expand=status
// and/or ?expand=info each connector's status and info by name (other
// expansions are ignored, as Connect ignores them).
func (h *Handler) connectors(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	expand := r.URL.Query()["expand"]
	if len(expand) == 0 {
		writeJSON(w, http.StatusOK, []string{h.info.Name})
		return
	}
	one := map[string]any{}
	if slices.Contains(expand, "status") {
		one["status"] = h.Report(h.now()).Redacted()
	}
	if slices.Contains(expand, "info") {
		one["info"] = h.infoBody()
	}
	writeJSON(w, http.StatusOK, map[string]any{h.info.Name: one})
}
