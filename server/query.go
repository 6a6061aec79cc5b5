package server

import (
	"github.com/orrery-db/orrery/engine"
)

// queryItems answers a query over a container's items.
func (s *Server) queryItems(r *request, c *engine.Container) error {
	return badRequest("Queries are not supported by this build.")
}

// queryResources answers a query over a feed of resources (databases,
// containers, offers).
func (s *Server) queryResources(r *request, rid, key string, docs [][]byte) error {
	return badRequest("Queries are not supported by this build.")
}
