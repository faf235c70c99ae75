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

// Names of the keys the data path treats specially.
const (
	KeyProduce             int16 = 0
	KeyFetch               int16 = 1
	KeyMetadata            int16 = 3
	KeyControlledShutdown  int16 = 7
	KeyFindCoordinator     int16 = 10
	KeyJoinGroup           int16 = 11
	KeyDescribeGroups      int16 = 15
	KeySASLHandshake       int16 = 17
	KeyApiVersions         int16 = 18
	KeyCreateTopics        int16 = 19
	KeyDeleteTopics        int16 = 20
	KeyDescribeConfigs     int16 = 32
	KeyAlterConfigs        int16 = 33
	KeySASLAuthenticate    int16 = 36
	KeyCreatePartitions    int16 = 37
	KeyIncrementalAlter    int16 = 44
	KeyOffsetDelete        int16 = 47
	KeyDescribeClientQuota int16 = 48
	KeyAlterClientQuotas   int16 = 49
	KeyDescribeUserSCRAM   int16 = 50
	KeyAlterUserSCRAM      int16 = 51
	KeyDescribeQuorum      int16 = 55
	KeyDescribeCluster     int16 = 60
	KeyConsumerGroupHB     int16 = 68
	KeyConsumerGroupDesc   int16 = 69
	KeyShareFetch          int16 = 78
	KeyShareAcknowledge    int16 = 79
)
