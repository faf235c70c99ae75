package api

// TenantSpec is a tenant as the config file, the admin HTTP API and the
// CLI write it.
type TenantSpec struct {
	Name string `yaml:"name" json:"name"`
	// Principals are principal names ("alice" for User:alice).
	Principals []string `yaml:"principals" json:"principals,omitempty"`
	// PrincipalPrefixes: every principal whose name starts with one.
	PrincipalPrefixes []string `yaml:"principal_prefixes" json:"principal_prefixes,omitempty"`
	// PrincipalRules are Kafka principal mapping rules; a principal
	// belongs when one of them maps its name to the tenant's name.
	PrincipalRules []string `yaml:"principal_rules" json:"principal_rules,omitempty"`
	// The ceilings all the tenant's principals share.
	ProducerByteRate       *float64 `yaml:"producer_byte_rate" json:"producer_byte_rate,omitempty"`
	ConsumerByteRate       *float64 `yaml:"consumer_byte_rate" json:"consumer_byte_rate,omitempty"`
	ControllerMutationRate *float64 `yaml:"controller_mutation_rate" json:"controller_mutation_rate,omitempty"`
	// ProducerIDsRate is Tollgate's producer_ids_rate: new producer ids
	// a second for the whole tenant.
	ProducerIDsRate *float64 `yaml:"producer_ids_rate" json:"producer_ids_rate,omitempty"`
	// Shadow: the ceilings are computed and shown, not applied.
	Shadow bool `yaml:"shadow" json:"shadow,omitempty"`
	// BurstSeconds is the ceilings' start-up burst in seconds of ceiling
	// (absent: Kafka's, 10 s).
	BurstSeconds *float64 `yaml:"burst_seconds" json:"burst_seconds,omitempty"`
	// Admins may describe and alter the quotas of the tenant's principals
	// through the Kafka API, never above the ceilings ("carol" or
	// "User:carol").
	Admins []string `yaml:"admins" json:"admins,omitempty"`
}

// CeilingKeys are a tenant's ceilings by Kafka's key names.
var CeilingKeys = []string{"producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate", "producer_ids_rate"}

// Ceilings returns the spec's ceilings by key name.
func (s TenantSpec) Ceilings() map[string]float64 {
	out := map[string]float64{}
	for _, k := range CeilingKeys {
		if v := *s.ceiling(k); v != nil {
			out[k] = *v
		}
	}
	return out
}

// SetCeiling sets the ceiling of key (one of CeilingKeys; nil: none).
func (s *TenantSpec) SetCeiling(key string, v *float64) {
	if p := s.ceiling(key); p != nil {
		*p = v
	}
}

func (s *TenantSpec) ceiling(key string) **float64 {
	switch key {
	case "producer_byte_rate":
		return &s.ProducerByteRate
	case "consumer_byte_rate":
		return &s.ConsumerByteRate
	case "controller_mutation_rate":
		return &s.ControllerMutationRate
	case "producer_ids_rate":
		return &s.ProducerIDsRate
	}
	return nil
}

// TenantAlter is a change to a tenant, kafka-configs style: lists gain
// and lose entries, ceilings and options are set (Set: the ceiling
// keys, shadow = 1, burst_seconds) or deleted (Delete). Removing what is
// absent, or adding what is there, is an error: the caller's view is
// stale.
type TenantAlter struct {
	AddPrincipals           []string           `json:"add_principals,omitempty"`
	RemovePrincipals        []string           `json:"remove_principals,omitempty"`
	AddPrincipalPrefixes    []string           `json:"add_principal_prefixes,omitempty"`
	RemovePrincipalPrefixes []string           `json:"remove_principal_prefixes,omitempty"`
	AddPrincipalRules       []string           `json:"add_principal_rules,omitempty"`
	RemovePrincipalRules    []string           `json:"remove_principal_rules,omitempty"`
	AddAdmins               []string           `json:"add_admins,omitempty"`
	RemoveAdmins            []string           `json:"remove_admins,omitempty"`
	Set                     map[string]float64 `json:"set,omitempty"`
	Delete                  []string           `json:"delete,omitempty"`
}

// Tenant is a tenant as the API shows it: its definition, where it is
// declared, and how its ceilings are used now.
type Tenant struct {
	TenantSpec
	// Source is "config" (the config file, changed only there) or "api".
	Source string          `json:"source"`
	Usage  []TenantCeiling `json:"usage"`
}

// Tenants is GET /api/v1/tenants's answer.
type Tenants struct {
	Tenants []Tenant `json:"tenants"`
}

// TenantDetail is GET /api/v1/tenants/{name}: the tenant and each
// principal's part of its ceilings (those seen in the last hour).
type TenantDetail struct {
	Tenant
	Members []TenantMember `json:"members"`
}

// TenantDeleted is DELETE /api/v1/tenants/{name}'s answer.
type TenantDeleted struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

// TenantCeiling is how one ceiling is used.
type TenantCeiling struct {
	Quota       string  `json:"quota"`
	Ceiling     float64 `json:"ceiling"`
	Rate        float64 `json:"rate"`
	Utilization float64 `json:"utilization"`
	// Active principals (a record in the last (N−1)·W) and the fair
	// share each is guaranteed while the ceiling binds.
	Active     int     `json:"active_principals"`
	FairShare  float64 `json:"fair_share"`
	Throttled  int64   `json:"throttled"`
	ThrottleMs int64   `json:"throttle_ms_total"`
	Shadow     bool    `json:"shadow,omitempty"`
	Shadowed   *Shadow `json:"shadowed,omitempty"`
}

// TenantMember is one principal's part of a ceiling.
type TenantMember struct {
	Principal string `json:"principal"`
	Quota     string `json:"quota"`
	// ChargedRate is what the principal sent while the ceiling bound,
	// per second: what its fair share holds.
	ChargedRate float64 `json:"charged_rate"`
	Active      bool    `json:"active"`
	Throttled   int64   `json:"throttled"`
	ThrottleMs  int64   `json:"throttle_ms_total"`
}
