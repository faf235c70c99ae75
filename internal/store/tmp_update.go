package store

import bolt "go.etcd.io/bbolt"

// TEMPORARY until the handover branch merges.
func (s *Store) update(fn func(*bolt.Tx) error) error { return s.db.Update(fn) }
func (s *Store) view(fn func(*bolt.Tx) error) error   { return s.db.View(fn) }
