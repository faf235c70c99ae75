package app

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sort"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// admissionSettings builds the connection-quota settings from the config:
// the listeners (and which are exempt), quota.window.* (Kafka shares them
// between client and connection quotas), the Kafka-named broker configs,
// and connection_creation_rate on ip entities.
func admissionSettings(c *Config, dynamic map[string]string, ips control.IPQuotas) (admission.Settings, error) {
	s := admission.DefaultSettings()
	if c.Quota.WindowNum > 0 {
		s.QuotaWindowNum = c.Quota.WindowNum
	}
	if c.Quota.WindowSize > 0 {
		s.QuotaWindowSizeSeconds = max(int(c.Quota.WindowSize.Seconds()), 1)
	}
	for _, l := range c.Listeners {
		s.Listeners = append(s.Listeners, admission.ListenerSettings{Name: l.Name, Exempt: l.Exempt})
	}
	var errs []error
	apply := func(src map[string]string) {
		keys := make([]string, 0, len(src))
		for k := range src {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic error order
		for _, k := range keys {
			if err := s.Set(k, src[k]); err != nil {
				errs = append(errs, fmt.Errorf("broker_configs: %w", err))
			}
		}
	}
	apply(c.BrokerConfigs)
	apply(dynamic) // set through the Kafka config API: wins over the file
	s.IPConnectionRates = map[netip.Prefix]int{}
	for name, v := range ips {
		if name == "" {
			s.DefaultIPConnectionRate = int(min(v, math.MaxInt32))
			continue
		}
		p, err := admission.ParseIPEntity(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("ip entity %q: %w", name, err))
			continue
		}
		s.IPConnectionRates[p] = int(min(v, math.MaxInt32))
	}
	for _, e := range c.Quotas {
		if ips != nil {
			break // the store's view has the file's ip entities laid over it
		}
		// The file's ip entities; buildQuotas reports the invalid ones.
		en, bad := e.Parse()
		v, ok := en.Values[model.KeyConnectionCreationRate]
		if len(bad) > 0 || !ok {
			continue
		}
		if name := en.IP(); name == nil {
			s.DefaultIPConnectionRate = int(v)
		} else if p, err := admission.ParseIPEntity(*name); err == nil {
			s.IPConnectionRates[p] = int(v)
		}
	}
	if err := s.Validate(); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}
