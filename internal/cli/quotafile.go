package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/internal/quota/model"
	"gopkg.in/yaml.v3"
)

// shapes a file may declare in `manage:`, in listing order.
var allShapes = []string{"user", "user+client_id", "client_id", "client_id_prefix", "ip",
	"user+topic", "user+topic_prefix", "client_id_prefix+topic", "client_id_prefix+topic_prefix", "topic", "topic_prefix"}

// quotaFile is a parsed quota file: the desired quotas and the entity
// shapes the file manages.
type quotaFile struct {
	desired state
	manages map[string]bool // shape → managed
}

// loadQuotaFile reads a quota file. Its top level is either the list of
// entries, or a mapping with `quotas:` (the list) and optionally `manage:`
// (shapes managed even without an entry: user, user+client_id, client_id,
// ip). Other top-level keys are ignored, so Tollgate's config file can be
// given as is.
func loadQuotaFile(path string) (*quotaFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	qf := &quotaFile{desired: state{}, manages: map[string]bool{}}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty file", path)
	}
	doc := root.Content[0]
	var list *yaml.Node
	switch doc.Kind {
	case yaml.SequenceNode:
		list = doc
	case yaml.MappingNode:
		for i := 0; i+1 < len(doc.Content); i += 2 {
			k, v := doc.Content[i], doc.Content[i+1]
			switch k.Value {
			case "quotas":
				if v.Kind != yaml.SequenceNode && !(v.Kind == yaml.ScalarNode && v.Tag == "!!null") {
					return nil, fmt.Errorf("%s:%d: quotas must be a list", path, v.Line)
				}
				list = v
			case "manage":
				var shapes []string
				if err := v.Decode(&shapes); err != nil {
					return nil, fmt.Errorf("%s:%d: manage must be a list of %s", path, v.Line, strings.Join(allShapes, ", "))
				}
				for _, s := range shapes {
					if !slices.Contains(allShapes, s) {
						return nil, fmt.Errorf("%s:%d: manage: unknown entity shape %q (one of %s)", path, v.Line, s, strings.Join(allShapes, ", "))
					}
					qf.manages[s] = true
				}
			}
		}
		if list == nil && len(qf.manages) == 0 {
			return nil, fmt.Errorf("%s: expected a list of quota entries, or a mapping with a quotas: list", path)
		}
	default:
		return nil, fmt.Errorf("%s: expected a list of quota entries, or a mapping with a quotas: list", path)
	}
	var errs []error
	if list != nil {
		var set model.Entries
		for i, item := range list.Content {
			for _, err := range qf.add(&set, item) {
				errs = append(errs, fmt.Errorf("%s:%d: quotas[%d]: %w", path, item.Line, i, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return qf, nil
}

// add adds one entry, parsed as the config file's are (model.Entries);
// it returns every problem of the entry.
func (qf *quotaFile) add(set *model.Entries, item *yaml.Node) []error {
	if item.Kind != yaml.MappingNode {
		return []error{errors.New("an entry must be a mapping")}
	}
	for i := 0; i+1 < len(item.Content); i += 2 {
		if k := item.Content[i].Value; !slices.Contains(model.FileKeys, k) {
			return []error{fmt.Errorf("unknown key %q", k)}
		}
	}
	var fe model.FileEntry
	if err := item.Decode(&fe); err != nil {
		return []error{err}
	}
	en, errs := set.Add(fe)
	if len(errs) > 0 {
		return errs
	}
	var e entity
	for _, p := range en.Parts {
		e.setPart(p.Type, wirePart(p.Name))
	}
	if qf.desired[e] == nil {
		qf.desired[e] = map[string]float64{}
	}
	maps.Copy(qf.desired[e], en.Values)
	qf.manages[e.shape()] = true
	return nil
}
