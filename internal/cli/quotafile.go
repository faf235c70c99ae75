package cli

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/quota"
)

// fileEntry is one entity of a quota file, in the shape of the quotas of
// Tollgate's config file.
type fileEntry = quota.FileEntry

var fileEntryKeys = []string{
	"user", "default_user", "client_id", "default_client_id", "client_id_prefix", "ip", "default_ip", "topic", "topic_prefix",
	"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate", "connection_creation_rate",
	"shadow", "burst_seconds",
}

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
		for i, item := range list.Content {
			for _, err := range qf.add(item) {
				errs = append(errs, fmt.Errorf("%s:%d: quotas[%d]: %w", path, item.Line, i, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return qf, nil
}

// add adds one entry; it returns every problem of the entry.
func (qf *quotaFile) add(item *yaml.Node) []error {
	if item.Kind != yaml.MappingNode {
		return []error{errors.New("an entry must be a mapping")}
	}
	for i := 0; i+1 < len(item.Content); i += 2 {
		if k := item.Content[i].Value; !slices.Contains(fileEntryKeys, k) {
			return []error{fmt.Errorf("unknown key %q", k)}
		}
	}
	var fe fileEntry
	if err := item.Decode(&fe); err != nil {
		return []error{err}
	}
	e, err := fileEntity(fe)
	if err != nil {
		return []error{err}
	}
	vals := []struct {
		k string
		v *float64
	}{
		{"producer_byte_rate", fe.ProducerByteRate},
		{"consumer_byte_rate", fe.ConsumerByteRate},
		{"request_percentage", fe.RequestPercentage},
		{"controller_mutation_rate", fe.ControllerMutationRate},
		{keyConnectionCreationRate, fe.ConnectionCreationRate},
	}
	var errs []error
	set := 0
	for _, kv := range vals {
		if kv.v == nil {
			continue
		}
		set++
		if e.isTopic() && kv.k != "producer_byte_rate" && kv.k != "consumer_byte_rate" {
			errs = append(errs, fmt.Errorf("%s: a topic quota takes producer_byte_rate and consumer_byte_rate only", kv.k))
			continue
		}
		if e.ip.set != (kv.k == keyConnectionCreationRate) {
			if e.ip.set {
				errs = append(errs, fmt.Errorf("%s: ip entities take connection_creation_rate only", kv.k))
			} else {
				errs = append(errs, fmt.Errorf("%s applies to ip entities only", kv.k))
			}
			continue
		}
		if err := validateQuotaValue(kv.k, *kv.v); err != nil {
			errs = append(errs, err)
			continue
		}
		if qf.desired[e] == nil {
			qf.desired[e] = map[string]float64{}
		}
		if _, dup := qf.desired[e][kv.k]; dup {
			errs = append(errs, fmt.Errorf("%s is set twice for %v", kv.k, e))
			continue
		}
		qf.desired[e][kv.k] = *kv.v
	}
	if set == 0 {
		errs = append(errs, fmt.Errorf("no quota key set for %v", e))
	}
	if fe.Shadow {
		if e.ip.set {
			errs = append(errs, errors.New("shadow: ip entities take connection_creation_rate only"))
		} else if len(errs) == 0 {
			qf.desired[e][keyShadow] = 1
		}
	}
	if b := fe.BurstSeconds; b != nil {
		switch {
		case e.ip.set:
			errs = append(errs, errors.New("burst_seconds: ip entities take connection_creation_rate only"))
		case !(*b >= 0 && *b <= quota.MaxBurstSeconds):
			errs = append(errs, fmt.Errorf("Quota burst_seconds must be from 0 to %d (seconds of quota a fresh client may send at once; 0: none; remove the key for Kafka's, 10)", quota.MaxBurstSeconds))
		case len(errs) == 0:
			qf.desired[e][keyBurstSeconds] = *b
		}
	}
	qf.manages[e.shape()] = true
	return errs
}

// fileEntity is fe's entity, ip entities included, checked as
// AlterClientQuotas checks them.
func fileEntity(fe fileEntry) (entity, error) {
	var e entity
	pick := func(what string, name *string, dflt bool) (part, error) {
		switch {
		case name != nil && dflt:
			return part{}, fmt.Errorf("%s and default_%s are exclusive", what, what)
		case name != nil && *name == "":
			return part{}, fmt.Errorf("%s must not be empty (default_%s: true is the default entity)", what, what)
		case name != nil:
			return named(*name), nil
		case dflt:
			return dfltPart(), nil
		}
		return part{}, nil
	}
	var err error
	if e.user, err = pick("user", fe.User, fe.DefaultUser); err != nil {
		return e, err
	}
	if e.client, err = pick("client_id", fe.ClientID, fe.DefaultClientID); err != nil {
		return e, err
	}
	if e.ip, err = pick("ip", fe.IP, fe.DefaultIP); err != nil {
		return e, err
	}
	if fe.ClientIDPrefix != nil && *fe.ClientIDPrefix == "" {
		return e, errors.New("client_id_prefix must not be empty (default_client_id: true is every client-id)")
	}
	if e.prefix, err = pick("client_id_prefix", fe.ClientIDPrefix, false); err != nil {
		return e, err
	}
	if fe.Topic != nil || fe.TopicPrefix != nil {
		return fileTopicEntity(fe, e)
	}
	switch {
	case e.prefix.set && (e.user.set || e.client.set || e.ip.set):
		return e, errors.New("client_id_prefix stands alone: it cannot have a user, a client_id or an ip")
	case e.ip.set && (e.user.set || e.client.set):
		return e, errors.New("an ip entity cannot have a user or a client_id")
	case !e.ip.set && !e.user.set && !e.client.set && !e.prefix.set:
		return e, errors.New("an entry needs user, default_user, client_id, default_client_id, client_id_prefix, ip or default_ip")
	}
	if e.ip.set && !e.ip.dflt {
		if _, err := admission.ParseIPEntity(e.ip.name); err != nil {
			return e, fmt.Errorf("ip: %w", err)
		}
	}
	return e, nil
}

// fileTopicEntity completes e, a per-topic entry's principal, with its
// topic, checked as AlterClientQuotas checks it.
func fileTopicEntity(fe fileEntry, e entity) (entity, error) {
	switch {
	case fe.Topic != nil && fe.TopicPrefix != nil:
		return e, errors.New("topic and topic_prefix are exclusive: a quota is on one topic or on the topics of a prefix")
	case fe.Topic != nil && *fe.Topic == "":
		return e, errors.New("topic must not be empty")
	case fe.TopicPrefix != nil && *fe.TopicPrefix == "":
		return e, errors.New("topic_prefix must not be empty")
	case e.client.set || e.ip.set:
		return e, errors.New("a topic quota is for a user, a client_id_prefix or every client: it cannot have a client_id or an ip")
	case e.prefix.set && e.user.set:
		return e, errors.New("client_id_prefix cannot be combined with a user")
	}
	if fe.Topic != nil {
		e.topic = named(*fe.Topic)
	} else {
		e.topicPrefix = named(*fe.TopicPrefix)
	}
	return e, nil
}

// validateQuotaValue applies the checks of Kafka's AlterClientQuotas, with
// its messages, so that a bad file fails before anything is sent.
func validateQuotaValue(k string, v float64) error {
	var limit float64
	var typ string
	switch k {
	case "producer_byte_rate", "consumer_byte_rate":
		limit, typ = math.MaxInt64, "a LONG"
	case keyConnectionCreationRate:
		limit, typ = math.MaxInt32, "an INT"
	}
	switch {
	case !(v > 0):
		return fmt.Errorf("Quota %s must be greater than 0", k)
	case typ != "" && v > limit:
		return fmt.Errorf("Proposed value for %s is too large for %s.", k, typ)
	case typ != "" && math.Abs(math.Mod(v, 1)) > 1e-6:
		return fmt.Errorf("%s cannot be a fractional value.", k)
	}
	return nil
}
