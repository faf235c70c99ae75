package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota"
)

// TenantManager lists and changes tenants: a *control.Tenants, which
// authorizes the initiator as the Kafka API does (quota admins only) and
// audits every change, denied ones included.
type TenantManager interface {
	List() []control.TenantInfo
	Get(name string) (control.TenantInfo, bool)
	CreateTenant(ctx context.Context, who control.Initiator, s api.TenantSpec) error
	ReplaceTenant(ctx context.Context, who control.Initiator, s api.TenantSpec) error
	AlterTenant(ctx context.Context, who control.Initiator, name string, a api.TenantAlter) error
	DeleteTenant(ctx context.Context, who control.Initiator, name string) error
}

// maxTenantBody bounds a tenant request's body (a tenant is at most
// 512 KiB: control.ValidateTenant).
const maxTenantBody = 1 << 20

// tenants serves the tenant endpoints:
//
//	GET    /api/v1/tenants         → 200 {"tenants": [Tenant]} (api.Tenants)
//	POST   /api/v1/tenants         {TenantSpec} → 201 Tenant
//	GET    /api/v1/tenants/{name}  → 200 Tenant, with members
//	PUT    /api/v1/tenants/{name}  {TenantSpec} → 200 Tenant (the whole definition)
//	PATCH  /api/v1/tenants/{name}  {TenantAlter} → 200 Tenant
//	DELETE /api/v1/tenants/{name}  → 200 {"name", "deleted": true}
//
// Changes need a quota admin, reads the read right; changes are audited
// with the caller's principal (listener admin-http). Bodies are
// application/json, one object, unknown fields refused, at most 1 MiB.
// Errors are {"error": "..."}: 400 invalid, 401 ANONYMOUS may not (send
// a key), 403 the principal may not, 404 no such tenant, 409 it exists
// or is the config file's, 415 not JSON, 503 no data directory, or the
// store or a required audit log failed (nothing was changed).
type tenants struct {
	m   TenantManager
	eng *quota.Engine
	now func() time.Time
}

func (t tenants) ok(w http.ResponseWriter) bool {
	if t.m == nil {
		fail(w, http.StatusServiceUnavailable, "tenants are not managed by this gateway")
		return false
	}
	return true
}

// controlError answers a control-plane call's error with the HTTP status
// it means (action names what ANONYMOUS would need a key for).
func controlError(w http.ResponseWriter, who control.Initiator, action string, err error) {
	switch {
	case errors.Is(err, control.ErrNotAuthorized) && who.Anonymous():
		needAuth(w, action)
	case errors.Is(err, control.ErrNotAuthorized):
		fail(w, http.StatusForbidden, err.Error())
	case errors.Is(err, control.ErrInvalid):
		fail(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, control.ErrNotFound):
		fail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, control.ErrConflict):
		fail(w, http.StatusConflict, err.Error())
	default:
		fail(w, http.StatusServiceUnavailable, err.Error())
	}
}

// usage returns every tenant's ceilings' use, by tenant.
func (t tenants) usage() map[string][]api.TenantCeiling {
	out := map[string][]api.TenantCeiling{}
	if t.eng == nil {
		return out
	}
	for _, u := range t.eng.TenantUsage(t.now()) {
		out[u.Tenant] = append(out[u.Tenant], api.TenantCeiling{Quota: u.Key.String(), Ceiling: u.Ceiling, Rate: u.Rate, Utilization: u.Utilization,
			Active: u.Active, FairShare: u.FairShare, Throttled: u.Throttles, ThrottleMs: u.ThrottleTotal.Milliseconds(),
			Shadow: u.Shadow, Shadowed: shadowJSON(u.Shadow, u.Shadowed)})
	}
	return out
}

// view renders a tenant with its usage (nil: read it now).
func (t tenants) view(in control.TenantInfo, usage map[string][]api.TenantCeiling) api.Tenant {
	out := api.Tenant{TenantSpec: in.TenantSpec, Source: "api", Usage: []api.TenantCeiling{}}
	if in.Fixed {
		out.Source = "config"
	}
	if usage == nil {
		usage = t.usage()
	}
	if u := usage[in.Name]; u != nil {
		out.Usage = u
	}
	return out
}

// detail renders a tenant with its usage and members.
func (t tenants) detail(in control.TenantInfo) api.TenantDetail {
	out := api.TenantDetail{Tenant: t.view(in, nil), Members: []api.TenantMember{}}
	if t.eng == nil {
		return out
	}
	for _, m := range t.eng.TenantMembers(in.Name, t.now()) {
		out.Members = append(out.Members, api.TenantMember{Principal: m.Principal, Quota: m.Key.String(), ChargedRate: m.Charged,
			Active: m.Active, Throttled: m.Throttles, ThrottleMs: m.ThrottleTotal.Milliseconds()})
	}
	return out
}

func (t tenants) list(w http.ResponseWriter, r *http.Request) {
	if !t.ok(w) {
		return
	}
	out := []api.Tenant{}
	usage := t.usage()
	for _, in := range t.m.List() {
		out = append(out, t.view(in, usage))
	}
	writeJSON(w, http.StatusOK, api.Tenants{Tenants: out})
}

func (t tenants) get(w http.ResponseWriter, r *http.Request) {
	if !t.ok(w) {
		return
	}
	in, found := t.m.Get(r.PathValue("name"))
	if !found {
		fail(w, http.StatusNotFound, fmt.Sprintf("tenant %q does not exist", r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, t.detail(in))
}

// answer writes the tenant as it now is.
func (t tenants) answer(w http.ResponseWriter, code int, name string) {
	in, found := t.m.Get(name)
	if !found {
		writeJSON(w, code, map[string]any{"name": name})
		return
	}
	writeJSON(w, code, t.view(in, nil))
}

func (t tenants) create(w http.ResponseWriter, r *http.Request) {
	var s api.TenantSpec
	if !t.body(w, r, &s) {
		return
	}
	t.change(w, r, http.StatusCreated, s.Name, func(ctx context.Context, who control.Initiator) error {
		return t.m.CreateTenant(ctx, who, s)
	})
}

func (t tenants) replace(w http.ResponseWriter, r *http.Request) {
	var s api.TenantSpec
	if !t.body(w, r, &s) {
		return
	}
	name := r.PathValue("name")
	if s.Name == "" {
		s.Name = name
	}
	if s.Name != name {
		fail(w, http.StatusBadRequest, fmt.Sprintf("the body names tenant %q, the path %q (a tenant cannot be renamed)", s.Name, name))
		return
	}
	t.change(w, r, http.StatusOK, name, func(ctx context.Context, who control.Initiator) error {
		return t.m.ReplaceTenant(ctx, who, s)
	})
}

func (t tenants) alter(w http.ResponseWriter, r *http.Request) {
	var a api.TenantAlter
	if !t.body(w, r, &a) {
		return
	}
	name := r.PathValue("name")
	t.change(w, r, http.StatusOK, name, func(ctx context.Context, who control.Initiator) error {
		return t.m.AlterTenant(ctx, who, name, a)
	})
}

func (t tenants) delete(w http.ResponseWriter, r *http.Request) {
	if !t.ok(w) {
		return
	}
	name := r.PathValue("name")
	if t.do(w, r, func(ctx context.Context, who control.Initiator) error { return t.m.DeleteTenant(ctx, who, name) }) {
		writeJSON(w, http.StatusOK, api.TenantDeleted{Name: name, Deleted: true})
	}
}

// body reads a change's request body into v, once the tenants are known
// to be managed here; false: it has answered.
func (t tenants) body(w http.ResponseWriter, r *http.Request, v any) bool {
	if !t.ok(w) {
		return false
	}
	if code, err := decodeJSON(r.Header.Get("Content-Type"), http.MaxBytesReader(w, r.Body, maxTenantBody), v); err != nil {
		fail(w, code, err.Error())
		return false
	}
	return true
}

// do makes a change as the request's initiator; false: it failed, and
// has been answered.
func (t tenants) do(w http.ResponseWriter, r *http.Request, change func(context.Context, control.Initiator) error) bool {
	who := initiatorOf(r)
	if err := change(r.Context(), who); err != nil {
		controlError(w, who, "change tenants", err)
		return false
	}
	return true
}

// change makes a change and answers with tenant name as it now is.
func (t tenants) change(w http.ResponseWriter, r *http.Request, code int, name string, change func(context.Context, control.Initiator) error) {
	if t.do(w, r, change) {
		t.answer(w, code, name)
	}
}

// decodeJSON reads a request body: Content-Type application/json, one
// JSON object, no unknown field. code is the HTTP status of the error.
func decodeJSON(contentType string, body io.Reader, v any) (int, error) {
	if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, errors.New("send the body as Content-Type: application/json")
	}
	if err := decodeOne(body, v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes", mbe.Limit)
		}
		return http.StatusBadRequest, err
	}
	return 0, nil
}

// decodeOne reads one JSON object, no unknown field, and nothing after it
// from body into v.
func decodeOne(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return errors.New("request body: more than one JSON value")
	}
	return nil
}
