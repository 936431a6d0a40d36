package protofmt

// Compiling a registry's Protobuf schema: the .proto text of a schema id,
// with the files it imports (the registry's references, by import path) and
// Google's well-known types, compiled by protocompile into descriptors; the
// message a record's message indexes select.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protoreflect"

	"sink/internal/registry"
)

// protoFileName is the name the schema's own text compiles under. It only
// has to differ from every import path; a registry does not store one.
func protoFileName(id int) string { return "sink/registry/schema-" + strconv.Itoa(id) + ".proto" }

// compiledProto shares compiled schemas between the Plans of one process
// (each route into each table has a Plan, and they often read the same
// topic's schemas). It is keyed by the *registry.Schema the registry
// client hands out, which stays the same while the client caches it, and
// bounded like the per-Plan caches. Descriptors are immutable, so sharing
// them between goroutines is safe.
var compiledProto struct {
	sync.Mutex
	m map[*registry.Schema]protoreflect.FileDescriptor
}

// maxCompiledProto bounds compiledProto; past it the map starts over.
const maxCompiledProto = 256

// CompileSchema compiles s (a Protobuf schema and its references), or
// returns the compilation another Plan made of the same *registry.Schema.
// The error is the schema's fault (it does not compile), worded for a
// record's dead-letter reason.
func CompileSchema(s *registry.Schema) (protoreflect.FileDescriptor, error) {
	compiledProto.Lock()
	fd, ok := compiledProto.m[s]
	compiledProto.Unlock()
	if ok {
		return fd, nil
	}
	fd, err := compileProto(s)
	if err != nil {
		return nil, err
	}
	compiledProto.Lock()
	if compiledProto.m == nil || len(compiledProto.m) >= maxCompiledProto {
		compiledProto.m = map[*registry.Schema]protoreflect.FileDescriptor{}
	}
	compiledProto.m[s] = fd
	compiledProto.Unlock()
	return fd, nil
}

func compileProto(s *registry.Schema) (protoreflect.FileDescriptor, error) {
	name := protoFileName(s.ID)
	srcs := make(map[string]string, len(s.References)+1)
	for _, r := range s.References {
		if err := checkProtoNesting(r.Text); err != nil {
			return nil, fmt.Errorf("reference %q: %v", r.Name, err)
		}
		srcs[r.Name] = r.Text
	}
	if err := checkProtoNesting(s.Text); err != nil {
		return nil, err // the caller names the schema id
	}
	srcs[name] = s.Text
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(srcs),
		}),
		// No source positions: they are only for error messages, and
		// cost memory per schema.
		SourceInfoMode: protocompile.SourceInfoNone,
	}
	files, err := c.Compile(context.Background(), name)
	if err != nil {
		return nil, fmt.Errorf("schema id %d does not compile as Protobuf: %v", s.ID, err)
	}
	return files[0], nil
}

// maxProtoTextDepth bounds the nesting of braces, brackets and angle
// brackets in a .proto text (messages, enums, option values, map types)
// before protocompile reads it: it takes time growing with the square of
// the depth (an option value 8,000 levels deep, 40 KB, took 1 s; 100,000
// levels did not finish in 4 minutes), on the goroutine that decodes.
// protocompile itself allows messages 32 levels deep, and option values
// nest a few.
const maxProtoTextDepth = 64

// checkProtoNesting refuses a .proto text that nests deeper than
// maxProtoTextDepth, skipping comments and string literals.
func checkProtoNesting(text string) error {
	depth := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '{', '[', '<':
			if depth++; depth > maxProtoTextDepth {
				return fmt.Errorf("the .proto text nests deeper than %d levels", maxProtoTextDepth)
			}
		case '}', ']', '>':
			depth = max(depth-1, 0)
		case '"', '\'':
			i = skipProtoString(text, i)
		case '/':
			i = skipProtoComment(text, i)
		}
	}
	return nil
}

// skipProtoString returns the index of the quote that closes the string
// literal opened at i (the text's end if none does).
func skipProtoString(text string, i int) int {
	quote := text[i]
	for i++; i < len(text) && text[i] != quote; i++ {
		if text[i] == '\\' {
			i++
		}
	}
	return i
}

// skipProtoComment returns the index of the comment's last byte when a
// comment starts at i (// to the line's end, /* to */), else i.
func skipProtoComment(text string, i int) int {
	if i+1 >= len(text) {
		return i
	}
	switch text[i+1] {
	case '/':
		if end := strings.IndexByte(text[i:], '\n'); end >= 0 {
			return i + end
		}
		return len(text)
	case '*':
		if end := strings.Index(text[i+2:], "*/"); end >= 0 {
			return i + 2 + end + 1
		}
		return len(text)
	}
	return i
}

// messageAt returns the message the frame's indexes select in fd: [i] is
// the file's i-th top-level message, [i, j] the j-th message nested in it.
func messageAt(fd protoreflect.FileDescriptor, indexes []int) (protoreflect.MessageDescriptor, error) {
	msgs := fd.Messages()
	var md protoreflect.MessageDescriptor
	for depth, i := range indexes {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: level %d has %d messages, no index %d", indexes, depth, msgs.Len(), i)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, fmt.Errorf("empty message index")
	}
	return md, nil
}
