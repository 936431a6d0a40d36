package consumer

import (
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/config"
)

// kzerolog routes franz-go's logs into the sink's zerolog logger. franz-go
// is chatty at info (every join, every assignment); those are worth keeping
// at debug so the info stream stays one line per interval.
type kzerolog struct{ l zerolog.Logger }

func (k kzerolog) Level() kgo.LogLevel {
	switch k.l.GetLevel() {
	case zerolog.TraceLevel, zerolog.DebugLevel:
		return kgo.LogLevelInfo
	case zerolog.InfoLevel, zerolog.WarnLevel:
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (k kzerolog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var e *zerolog.Event
	switch level {
	case kgo.LogLevelError:
		e = k.l.Error()
	case kgo.LogLevelWarn:
		e = k.l.Warn()
	default:
		e = k.l.Debug()
	}
	e = e.Str("component", "kafka")
	for i := 0; i+1 < len(keyvals); i += 2 {
		if key, ok := keyvals[i].(string); ok {
			e = e.Interface(key, keyvals[i+1])
		}
	}
	e.Msg(msg)
}

// kmsgMetadata asks for the consumed topics, or all topics for a regex.
func kmsgMetadata(k config.Kafka) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	if k.TopicRegex != "" {
		req.Topics = nil // nil asks for every topic
		return req
	}
	for _, t := range k.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return req
}
