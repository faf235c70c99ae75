package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// API is what the gateway knows of one API key, precomputed once from kmsg so
// that the per-frame path never allocates a kmsg message to ask.
type API struct {
	Known    bool  // kmsg has a request type for the key
	Max      int16 // newest version kmsg can encode and decode
	FlexFrom int16 // first flexible version, or -1 if never flexible
	Name     string
}

// MaxKey is the largest API key kmsg knows.
const MaxKey = kmsg.MaxKey

// apis is built by a variable initializer rather than an init function so
// that package-level variables derived from Lookup (ApiVersionsMax) are
// initialized after it: Go runs all variable initializers before any init.
var apis = loadAPIs()

func loadAPIs() (apis [MaxKey + 1]API) {
	for k := int16(0); k <= MaxKey; k++ {
		r := kmsg.RequestForKey(k)
		if r == nil {
			continue
		}
		a := API{Known: true, Max: r.MaxVersion(), FlexFrom: -1, Name: kmsg.NameForKey(k)}
		for v := int16(0); v <= a.Max; v++ {
			r.SetVersion(v)
			if r.IsFlexible() {
				a.FlexFrom = v
				break
			}
		}
		apis[k] = a
	}
	return apis
}

// Lookup returns what kmsg knows of key; Known is false for keys outside
// kmsg's range (vendor keys, garbage).
func Lookup(key int16) API {
	if key < 0 || key > MaxKey {
		return API{}
	}
	return apis[key]
}

// Flexible reports whether (key, version) uses flexible encoding, which for
// requests means a v2 header (with a tag section) and for responses a v1
// header, except ApiVersions whose response header is always v0.
func (a API) Flexible(version int16) bool {
	return a.Known && a.FlexFrom >= 0 && version >= a.FlexFrom
}

// Supports reports whether the gateway can parse version of this key.
func (a API) Supports(version int16) bool {
	return a.Known && version >= 0 && version <= a.Max
}
