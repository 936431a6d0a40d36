package consumer

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sink/config"
	"sink/internal/kafkaauth"
)

// kzerolog routes franz-go's logs into the sink's zerolog logger. franz-go
// is chatty at info (every join, every assignment); those are worth keeping
// at debug so the info stream stays one line per interval. A failed SASL
// authentication is logged once per cause (authLog), not once per retry.
type kzerolog struct {
	l    zerolog.Logger
	auth *authLog
}

func newKzerolog(l zerolog.Logger) kzerolog { return kzerolog{l: l, auth: &authLog{}} }

// authRepeat is how long a failed authentication with the same cause stays
// at debug after it was logged once at its own level.
const authRepeat = 5 * time.Minute

// authLog remembers the last authentication failure logged, so that
// franz-go's retries (one per connection attempt, on every broker) of the
// same cause (kafkaauth.Classify's class and the error's text) add no
// line until the cause changes or authRepeat passes. franz-go logs from
// many goroutines; the mutex guards it.
type authLog struct {
	mu         sync.Mutex
	cause      string
	at         time.Time
	suppressed int
}

// repeat reports whether err, an authentication failure of class, repeats
// the cause logged last within authRepeat, and counts it if so; when it
// does not, it becomes the cause logged last, and the count of the
// repeats it ends is returned.
func (a *authLog) repeat(class kafkaauth.Class, err error, now time.Time) (repeated bool, before int) {
	cause := string(class) + "\x00" + err.Error()
	a.mu.Lock()
	defer a.mu.Unlock()
	if cause == a.cause && now.Sub(a.at) < authRepeat {
		a.suppressed++
		return true, 0
	}
	before = a.suppressed
	a.cause, a.at, a.suppressed = cause, now, 0
	return false, before
}

// authFailure finds the error of a franz-go log line and its class, when
// it is an authentication failure.
func authFailure(keyvals []any) (kafkaauth.Class, error, bool) {
	for i := 0; i+1 < len(keyvals); i += 2 {
		if err, ok := keyvals[i+1].(error); ok && keyvals[i] == "err" {
			if c := kafkaauth.Classify(err); c != kafkaauth.None {
				return c, err, true
			}
		}
	}
	return kafkaauth.None, nil, false
}

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
	class, err, isAuth := authFailure(keyvals)
	if isAuth && k.auth != nil && level <= kgo.LogLevelWarn {
		repeated, before := k.auth.repeat(class, err, time.Now())
		if repeated {
			level = kgo.LogLevelDebug
		} else if before > 0 {
			keyvals = append(keyvals, "repeats_of_previous_cause", before)
		}
	}
	switch level {
	case kgo.LogLevelError:
		e = k.l.Error()
	case kgo.LogLevelWarn:
		e = k.l.Warn()
	default:
		e = k.l.Debug()
	}
	e = e.Str("component", "kafka")
	if isAuth {
		e = e.Str("auth_error", string(class))
	}
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
