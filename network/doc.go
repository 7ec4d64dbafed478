// Package network owns the node's pod network configuration: when the
// runtime's CNI configuration directory holds no network, it writes a bridge
// network for the node's pod CIDR; an existing network is validated and never
// overwritten. Configurations are built and checked with libcni, which also
// asks each plugin binary whether it supports the configuration's version.
package network
