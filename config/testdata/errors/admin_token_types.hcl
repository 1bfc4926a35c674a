application_id = "app"

admin {
  listen         = "[::1]:9464"
  token          = ""
  metrics_public = "yes"
}

# expect: 5:20: error: Invalid admin token | The admin token is empty; leave admin.token out
# expect: 6:20: error: Incorrect attribute value type | The argument "metrics_public" must be true or false, not string.
