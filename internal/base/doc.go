// Package base is rlock's vocabulary, shared by every other package of the
// module: the error sentinels (re-exported by package rlock), the owner a
// context carries, the limits on names and owner IDs, the Redisson key
// layout and Redis Cluster hash slots. It imports no other rlock package.
package base
