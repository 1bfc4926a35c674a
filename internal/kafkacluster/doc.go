// Package kafkacluster starts a real Apache Kafka cluster (scripts/kafka) for tests, which
// run only when STATEHOST_TEST_KAFKA=1 asks for them.
package kafkacluster
