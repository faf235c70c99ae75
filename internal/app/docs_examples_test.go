package app

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// yamlBlock is a fenced ```yaml block of a Markdown file.
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// A config written from the docs works: every YAML example in README.md
// and docs/*.md that is a Tollgate config (a mapping of the config's own
// keys) names only keys the code reads, each in its place; one that
// declares listeners is a whole config and validates too. And the config
// files in examples/ load.
func TestDocsConfigExamples(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	top := map[string]bool{}
	for _, k := range yamlKeys(reflect.TypeOf(Config{}), "") {
		top[strings.SplitN(strings.SplitN(k, ".", 2)[0], "[", 2)[0]] = true
	}
	checked := 0
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllSubmatchIndex(doc, -1) {
			block := doc[m[2]:m[3]]
			line := bytes.Count(doc[:m[2]], []byte("\n")) + 1
			var raw map[string]any
			if yaml.Unmarshal(block, &raw) != nil || len(raw) == 0 {
				continue // not a mapping: a list of entries, a Kubernetes object...
			}
			ours := true
			for k := range raw {
				ours = ours && top[k]
			}
			if !ours {
				continue // another program's YAML (a quotas apply file, a manifest)
			}
			checked++
			name := filepath.Base(f) + ":" + strconv.Itoa(line)
			var c Config
			dec := yaml.NewDecoder(bytes.NewReader(block))
			dec.KnownFields(true)
			if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
				t.Errorf("%s: the example does not parse as a config: %v\n%s", name, err, block)
				continue
			}
			if _, whole := raw["listeners"]; whole {
				if _, err := Parse(name, bytes.NewReader(block)); err != nil {
					t.Errorf("%s: the example config does not validate: %v", name, err)
				}
			}
		}
	}
	t.Logf("%d config examples checked", checked)
	if checked < 5 {
		t.Errorf("only %d config examples found in the docs", checked)
	}
	examples, _ := filepath.Glob("../../examples/*/*.yaml")
	if len(examples) == 0 {
		t.Fatal("no config files in examples/")
	}
	for _, e := range examples {
		if _, err := Load(e); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
}
