// kfake-host runs franz-go's kfake, an in-memory Kafka cluster written in Go, as a process
// of its own on 127.0.0.1, so that perf.compare measures it from outside (RSS and CPU from
// /proc, clients over real sockets) exactly as it measures nullbroker and librdkafka's mock.
//
// It prints one line when the cluster listens:
//
//	kfake listening on 127.0.0.1:PORT (kfake VERSION, N partitions per auto-created topic)
//
// and closes the cluster and exits 0 on SIGTERM or SIGINT, when the process that started it
// exits, or after -lifetime. Built by scripts/ensure-kfake.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

const (
	kfakeModule    = "github.com/twmb/franz-go/pkg/kfake"
	parentPoll     = 500 * time.Millisecond
	retentionEvery = time.Second
)

func main() {
	partitions := flag.Int("partitions", 4, "partitions of a topic created by Metadata or by CreateTopics with -1 partitions")
	lifetime := flag.Duration("lifetime", 0, "exit by itself after this long (0: run until SIGTERM)")
	retention := flag.Int64("retention-bytes", -1, "keep about this many bytes of each partition, the oldest batches dropped every second (log.retention.bytes; a topic's retention.bytes overrides it); -1 keeps everything")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags]\n\n"+
			"Runs franz-go's kfake as a single broker on 127.0.0.1 (a port the OS picks), topics\n"+
			"auto-created on first use, until SIGTERM.\n\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if *partitions <= 0 {
		fmt.Fprintln(os.Stderr, "kfake-host: -partitions must be positive")
		os.Exit(2)
	}

	options := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
	}
	if *retention >= 0 {
		options = append(options, kfake.BrokerConfigs(map[string]string{
			"log.retention.bytes": strconv.FormatInt(*retention, 10),
		}))
	}
	cluster, err := kfake.NewCluster(options...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake-host: %v\n", err)
		os.Exit(1)
	}
	if *retention >= 0 {
		go applyRetention(cluster)
	}
	// Handlers before the line: a reader that stops us as soon as it sees it is obeyed.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	fmt.Printf("kfake listening on %s (kfake %s, %d partitions per auto-created topic)\n",
		cluster.ListenAddrs()[0], kfakeVersion(), *partitions)

	var expired <-chan time.Time
	if *lifetime > 0 {
		expired = time.After(*lifetime)
	}
	select {
	case <-signals:
	case <-expired:
		fmt.Fprintf(os.Stderr, "kfake-host: -lifetime %s over, exiting\n", *lifetime)
	case <-orphaned(os.Getppid()):
		fmt.Fprintln(os.Stderr, "kfake-host: the process that started it is gone, exiting")
	}
	cluster.Close()
}

// applyRetention drops what retention.bytes no longer keeps, every second: kfake applies it
// only when asked (or hourly, on its cleaner's schedule), and a benchmark that sends
// gigabytes must not keep them all.
func applyRetention(cluster *kfake.Cluster) {
	for range time.Tick(retentionEvery) {
		cluster.ApplyRetention()
	}
}

// orphaned is closed once the parent has exited (we are re-parented), so a benchmark that
// dies without stopping us leaves no broker behind.
func orphaned(parent int) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		for os.Getppid() == parent {
			time.Sleep(parentPoll)
		}
		close(gone)
	}()
	return gone
}

// kfakeVersion is the module version built in, so every result names the kfake it measured.
func kfakeVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, module := range info.Deps {
		if module.Path == kfakeModule {
			return module.Version
		}
	}
	return "unknown"
}
