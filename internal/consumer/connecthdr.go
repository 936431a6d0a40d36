package consumer

import (
	"errors"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka Connect's dead-letter context headers, which a dead-lettered copy
// carries beside the sink's own (SinkHeaders), so that a consumer of a
// Connect dead-letter queue reads the sink's the same way. Every value is
// UTF-8 text, as Connect writes them.
const (
	ConnectTopic          = "__connect.errors.topic"
	ConnectPartition      = "__connect.errors.partition"
	ConnectOffset         = "__connect.errors.offset"
	ConnectConnector      = "__connect.errors.connector.name"
	ConnectTaskID         = "__connect.errors.task.id"
	ConnectStage          = "__connect.errors.stage"
	ConnectExceptionClass = "__connect.errors.exception.class.name"
	ConnectExceptionMsg   = "__connect.errors.exception.message"
	ConnectStacktrace     = "__connect.errors.exception.stacktrace"
)

// The sink's own dead-letter headers, on every copy.
const (
	HeaderError           = "sink.error"
	HeaderSourceTopic     = "sink.source.topic"
	HeaderSourcePartition = "sink.source.partition"
	HeaderSourceOffset    = "sink.source.offset"
	HeaderSourceTimestamp = "sink.source.timestamp"
)

// DeadLetterHeaders lists the headers every dead-lettered copy carries, in
// the order they are written: the sink's, then Connect's. (A copy cut to
// fit its topic also has HeaderValueTruncated, HeaderKeyDropped or
// HeaderValueDropped.)
var DeadLetterHeaders = []string{
	HeaderError, HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset, HeaderSourceTimestamp,
	ConnectTopic, ConnectPartition, ConnectOffset, ConnectConnector, ConnectTaskID, ConnectStage,
	ConnectExceptionClass, ConnectExceptionMsg, ConnectStacktrace,
}

// deadLetterClass is a bad record's error that knows its class, as the
// dead-letter table records it (malformed, column, unrouted, decoder,
// other; tables.Classified makes one), so that the copy's Connect headers
// name the stage that failed.
type deadLetterClass interface{ DeadLetterClass() string }

// connectStage maps an error class to the Connect stage and the exception
// class a Connect worker would report for the same failure: a record that
// does not parse, or a decoder that failed on it, fails in the value
// converter; a value a column cannot take fails in the sink task's put,
// with the DataException Connect's converters and sinks throw for data;
// anything else is a ConnectException of the task.
func connectStage(class string) (stage, exception string) {
	const (
		data    = "org.apache.kafka.connect.errors.DataException"
		connect = "org.apache.kafka.connect.errors.ConnectException"
	)
	switch class {
	case "malformed", "decoder":
		return "VALUE_CONVERTER", data
	case "column":
		return "TASK_PUT", data
	}
	return "TASK_PUT", connect
}

// connectHeaders are Connect's context headers for rec, dead-lettered by
// connector for msg (the capped error text). The task id is always 0: one
// sink process is one task. The stack trace is the exception's first line,
// as a Java trace begins; the sink has no Java frames to add.
func connectHeaders(connector string, rec *kgo.Record, cause error, msg string) []kgo.RecordHeader {
	class := ""
	var dc deadLetterClass
	if errors.As(cause, &dc) {
		class = dc.DeadLetterClass()
	}
	stage, exception := connectStage(class)
	h := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	return []kgo.RecordHeader{
		h(ConnectTopic, rec.Topic),
		h(ConnectPartition, strconv.Itoa(int(rec.Partition))),
		h(ConnectOffset, strconv.FormatInt(rec.Offset, 10)),
		h(ConnectConnector, connector),
		h(ConnectTaskID, "0"),
		h(ConnectStage, stage),
		h(ConnectExceptionClass, exception),
		h(ConnectExceptionMsg, msg),
		h(ConnectStacktrace, exception+": "+msg),
	}
}
