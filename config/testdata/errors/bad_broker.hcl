application_id = "wordcount"

kafka {
  brokers = ["localhost", "kafka:99999", ":9092", "kafka-1:9092", 9092]
}

# expect: 4:14: error: Invalid address | The broker address "localhost" must be of the form "host:port"
# expect: 4:27: error: Invalid address | has port "99999"; a port is a number from 1 to 65535.
# expect: 4:42: error: Invalid address | The broker address ":9092" has no host
# expect: 4:67: error: Invalid list element | The elements of "brokers" must be strings, not number.
