package connectimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Import is `sink import` over files: the conversion's Options, and where
// each connector's YAML goes (OutDir/NAME.yaml, refusing to replace a file
// unless Force; or Stdout, the YAML to stdout and the tables to stderr).
type Import struct {
	Options
	OutDir string
	Stdout bool
	Force  bool
	// Records reads a sample of each topic of a connector that names no
	// value.converter (Result.SampleTopics), SampleSize records a topic, to
	// check what the Connect worker's converter writes; nil or 0: the
	// topics are not read.
	Records    Records
	SampleSize int
}

// Run converts every connector of args (files, and directories standing
// for their *.json and *.properties files), writes its YAML and prints
// what became of each key. It returns the exit status: 0 when every key
// was carried or is not needed, 1 when a key is not supported (the YAML
// is written all the same) or an input could not be converted.
func (im Import) Run(args []string, stdout, stderr io.Writer) int {
	files, err := inputs(args)
	if err != nil {
		fmt.Fprintf(stderr, "sink import: %v\n", err)
		return 1
	}
	tables := stdout
	if im.Stdout {
		tables = stderr
	}
	run := &importRun{Import: im, stdout: stdout, stderr: stderr, tables: tables, written: map[string]string{}}
	status := 0
	for _, file := range files {
		if !run.one(file) {
			status = 1
		}
		if run.broken {
			return 1
		}
	}
	return status
}

// importRun is one Run: its outputs and the files written so far.
type importRun struct {
	Import
	stdout, stderr, tables io.Writer
	written                map[string]string // output path -> input, so two inputs never write one file
	broken                 bool              // stdout failed: stop
}

// one converts file and writes its YAML and fate table; false when the
// file could not be converted or a key is not supported.
func (r *importRun) one(file string) bool {
	c, res, err := convertFile(file, r.Options)
	if err == nil && len(res.SampleTopics) > 0 && r.Records != nil && r.SampleSize > 0 {
		o := r.Options
		o.Samples = sampleTopics(r.Records, res.YAML, res.SampleTopics, r.SampleSize)
		if res, err = Convert(c, o); err != nil {
			err = fmt.Errorf("%s: %w", file, err)
		}
	}
	if err != nil {
		fmt.Fprintf(r.stderr, "sink import: %v\n", err)
		return false
	}
	dest, ok := r.write(file, c, res)
	if !ok {
		return false
	}
	fmt.Fprintf(r.tables, "== %s: connector %q -> %s (group %s)\n", file, c.Name, dest, groupOf(res.YAML))
	PrintFates(r.tables, res.Fates)
	for _, n := range res.Notes {
		fmt.Fprintf(r.tables, "note: %s\n", n)
	}
	supported := true
	if u := res.Unsupported(); len(u) > 0 {
		keys := make([]string, len(u))
		for i, f := range u {
			keys[i] = f.Key
		}
		fmt.Fprintf(r.tables, "NOT SUPPORTED: %s\n", strings.Join(keys, ", "))
		supported = false
	}
	fmt.Fprintln(r.tables)
	return supported
}

// convertFile reads, parses and converts one input file; its errors name
// the file.
func convertFile(file string, o Options) (Connector, *Result, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Connector{}, nil, err
	}
	c, err := Parse(file, data)
	if err != nil {
		return c, nil, err
	}
	res, err := Convert(c, o)
	if err != nil {
		return c, nil, fmt.Errorf("%s: %w", file, err)
	}
	return c, res, nil
}

// write puts the YAML of file's connector where it goes and returns
// where that is; !ok (the problem printed) when it cannot.
func (r *importRun) write(file string, c Connector, res *Result) (string, bool) {
	if r.Stdout {
		if _, err := r.stdout.Write(res.YAML); err != nil {
			fmt.Fprintf(r.stderr, "sink import: %v\n", err)
			r.broken = true
			return "", false
		}
		return "standard output", true
	}
	dest := filepath.Join(r.OutDir, res.Name+".yaml")
	if prev, ok := r.written[dest]; ok {
		fmt.Fprintf(r.stderr, "sink import: %s: connector %q would overwrite %s, written from %s\n", file, c.Name, dest, prev)
		return "", false
	}
	if err := writeNew(dest, res.YAML, r.Force); err != nil {
		fmt.Fprintf(r.stderr, "sink import: %s: %v\n", file, err)
		return "", false
	}
	r.written[dest] = file
	return dest, true
}

// inputs expands directories into their *.json and *.properties files,
// in name order.
func inputs(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		for _, pat := range []string{"*.json", "*.properties"} {
			m, err := filepath.Glob(filepath.Join(a, pat))
			if err != nil {
				return nil, err
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no *.json or *.properties file in it", a)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// writeNew writes a file, refusing to replace one unless force.
func writeNew(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists (--force replaces it)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// groupOf reads kafka.group back from the YAML, for the summary line.
func groupOf(y []byte) string {
	for _, line := range bytes.Split(y, []byte("\n")) {
		if g, ok := bytes.CutPrefix(line, []byte("  group: ")); ok {
			return string(g)
		}
	}
	return "?"
}
