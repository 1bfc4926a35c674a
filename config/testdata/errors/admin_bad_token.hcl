application_id = "app"

admin {
  listen = "10.1.2.3:9464"
  token  = "two words"
}

# expect: 5:12: error: Invalid admin token | The admin token may contain only printable ASCII characters, without spaces
# not printed: two words
