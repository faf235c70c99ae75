package httpapi

import (
	"net/http"

	"github.com/tollgate/tollgate/internal/api"
)

// EndpointCluster lists the Tollgate cluster's instances as this one sees
// them (docs/cluster.md).
const EndpointCluster = "/api/v1/cluster"

func (s Sources) cluster(w http.ResponseWriter, _ *http.Request) {
	var st api.ClusterStatus
	ok := false
	if s.Cluster != nil {
		st, ok = s.Cluster()
	}
	if !ok {
		fail(w, http.StatusNotFound, "this instance is not part of a Tollgate cluster (cluster.id is not set)")
		return
	}
	writeJSON(w, http.StatusOK, st)
}
