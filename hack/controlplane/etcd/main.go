// Command etcd is the etcd server, built from the same module version that
// kube-apiserver is tested with upstream.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
