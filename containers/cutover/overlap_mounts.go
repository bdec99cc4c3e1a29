package cutover

// Which of a predecessor's mounts a second instance cannot share: the
// overlap cutover runs the new container beside the predecessor on the same
// data, which only a service that allows two instances survives. A named
// volume the module declares exclusive, and a mount of a known store's data
// directory, refuse it. The check reads the recorded mounts only.

import (
	"fmt"
	"path"
	"slices"
)

// storeDataDirs are where known stores keep their data inside their
// containers (the official images' defaults): two processes on one of them
// corrupt it or refuse to start.
var storeDataDirs = map[string]string{
	"/var/lib/postgresql/data":      "PostgreSQL",
	"/var/lib/postgresql":           "PostgreSQL",
	"/var/lib/mysql":                "MySQL/MariaDB",
	"/data/db":                      "MongoDB",
	"/bitnami/postgresql":           "PostgreSQL",
	"/bitnami/mariadb":              "MariaDB",
	"/var/lib/redis":                "Redis",
	"/var/lib/etcd":                 "etcd",
	"/etcd-data":                    "etcd",
	"/var/lib/rabbitmq":             "RabbitMQ",
	"/var/lib/elasticsearch":        "Elasticsearch",
	"/usr/share/elasticsearch/data": "Elasticsearch",
	"/var/lib/clickhouse":           "ClickHouse",
	"/var/lib/influxdb":             "InfluxDB",
	"/var/lib/influxdb2":            "InfluxDB",
	"/var/lib/cassandra":            "Cassandra",
}

// OverlapMountProblem says why the mounts of pred cannot be shared by a
// second instance started beside it: a named volume in exclusive, or a
// mount of a known store's data directory; nil when every mount can be.
func OverlapMountProblem(pred *Predecessor, exclusive []string) error {
	if pred == nil {
		return nil
	}
	for _, m := range pred.Mounts {
		if m.Type == "volume" && m.Name != "" && slices.Contains(exclusive, m.Name) {
			return fmt.Errorf("container %s mounts volume %s at %s, which the module declares exclusive (container.exclusive): two instances must not share it; use cutover: swap: %w",
				pred.Name, m.Name, m.Destination, ErrBadSpec)
		}
		if store, ok := storeDataDirs[path.Clean(m.Destination)]; ok && (m.Type == "bind" || m.Type == "volume") {
			what := "bind mount " + m.Source
			if m.Type == "volume" {
				what = "volume " + m.Name
			}
			return fmt.Errorf("container %s mounts %s at %s, the data directory of %s, which one instance at a time may use: use cutover: swap: %w",
				pred.Name, what, m.Destination, store, ErrBadSpec)
		}
	}
	return nil
}
