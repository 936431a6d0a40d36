package decode

import (
	"sink/internal/decode/format"
)

// CompileOption adds to what Compile gets beyond the table and the route.
type CompileOption func(*compileOptions)

type compileOptions struct {
	reg     format.Registry
	message string
}

// WithRegistry gives the registry-framed formats their schema registry;
// Compile refuses those formats without one.
func WithRegistry(r format.Registry) CompileOption {
	return func(o *compileOptions) { o.reg = r }
}

// WithMessage makes a protobuf plan read only records of the named message
// type (its full name, package.Message); records of other types in the
// topic carry no row for it (Append returns an error matching ErrSkip).
func WithMessage(fullName string) CompileOption {
	return func(o *compileOptions) { o.message = fullName }
}
