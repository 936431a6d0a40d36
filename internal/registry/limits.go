package registry

// Bounds on what the registry answers: whoever can register schemas
// chooses their size and their references, and the client reads them
// before any decoder parses them.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

const (
	// maxAnswerBytes bounds one answer of the registry (a schema's text
	// with its JSON envelope, an id's subjects), enforced while the
	// answer is read: far above real schemas (the suite's 300-field
	// Protobuf message is 7 KB) and small enough that parsing one costs
	// tens of MB, not the process.
	maxAnswerBytes = 4 << 20
	// maxReferences bounds the schemas one schema references, transitively.
	maxReferences = 256
	// maxSchemaBytes bounds a schema's text with the texts it references.
	maxSchemaBytes = 16 << 20
)

// errAnswerTooLarge is the read error of an answer past maxAnswerBytes;
// classify makes it the id's ErrBadRecord (asking again gets the same
// answer, and the record must not hold its partition).
var errAnswerTooLarge = fmt.Errorf("the registry's answer is larger than %d bytes", maxAnswerBytes)

// limitAnswers makes next's response bodies fail past maxAnswerBytes.
type limitAnswers struct{ next http.RoundTripper }

func (l limitAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: maxAnswerBytes}
	}
	return resp, err
}

// cappedBody reads at most left more bytes of a body and fails with
// errAnswerTooLarge if the body has more.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, errAnswerTooLarge
		} else if err != nil {
			return 0, err
		}
		return 0, nil
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// tooLarge is the bad-record error of schema id when its references pass
// maxReferences or their texts maxSchemaBytes (nil otherwise).
func tooLarge(id int, refs []Reference, text int) error {
	if len(refs) > maxReferences {
		return fmt.Errorf("%w: schema id %d references more than %d schemas", ErrBadRecord, id, maxReferences)
	}
	for _, r := range refs {
		text += len(r.Text)
	}
	if text > maxSchemaBytes {
		return fmt.Errorf("%w: schema id %d with its references is %d bytes of text, more than %d", ErrBadRecord, id, text, maxSchemaBytes)
	}
	return nil
}

// isTooLarge reports an answer cut at maxAnswerBytes.
func isTooLarge(err error) bool { return errors.Is(err, errAnswerTooLarge) }
