application_id = "wordcount"

kafka {
  brokers = ["kafka-1:9092"]
}

embedded_broker {
  listen = "9092"
}

admin {
  listen = "localhost"
}

# expect: 7:1: warning: Embedded broker not used | ignored because kafka.brokers is set (testdata/errors/bad_listen.hcl:4)
# expect: 8:12: error: Invalid address | The embedded broker listen address "9092" must be of the form "host:port"
# expect: 12:12: error: Invalid address | The admin listen address "localhost" must be of the form "host:port"
