package connect

// Member skips `ws name ws : ws` from b[i] and returns where the value starts.
func Member(b []byte, i int, name string) (int, bool) {
	i = SkipSpace(b, i)
	if len(b)-i < len(name) || string(b[i:i+len(name)]) != name {
		return 0, false
	}
	if i = SkipSpace(b, i+len(name)); i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return SkipSpace(b, i+1), true
}

// SkipSpace returns the index of the first byte from b[i] on that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// ValueEnd returns the end of the object, array or null starting at b[i]
// (brackets matched outside strings; the content is not validated — the
// payload is parsed afterwards and the schema on a cache miss).
func ValueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	if b[i] == 'n' {
		if len(b)-i >= 4 && string(b[i:i+4]) == "null" {
			return i + 4, true
		}
		return 0, false
	}
	if b[i] != '{' && b[i] != '[' {
		return 0, false
	}
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		}
	}
	return 0, false
}
