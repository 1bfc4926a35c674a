// Package broker runs the Kafka-protocol broker that statehost embeds: one kfake broker
// whose log, topics and group offsets persist in a data directory.
package broker
