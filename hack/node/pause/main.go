// Command pause is the pod sandbox process of the single-node test cluster:
// it does nothing until it is told to stop. The kubelet needs a sandbox
// image, and the public one cannot be pulled here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
