package route

import (
	"fmt"
	"strings"
)

// CheckMessage checks a route's message option: the full name
// (package.Message, nested types as package.Outer.Inner) of the Protobuf
// message type the route reads from a topic that carries several; records
// of other types are skipped. Only the protobuf format has it.
func CheckMessage(f Format, name string) error {
	if name == "" {
		return nil
	}
	if f != Protobuf {
		return fmt.Errorf("only for format %s (a Protobuf topic's message type)", Protobuf)
	}
	for _, part := range strings.Split(name, ".") {
		if !protoIdent(part) {
			return fmt.Errorf("%q is not a Protobuf full name such as my.pkg.Event", name)
		}
	}
	return nil
}

// protoIdent reports whether s is a Protobuf identifier: a letter or
// underscore, then letters, digits and underscores.
func protoIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
