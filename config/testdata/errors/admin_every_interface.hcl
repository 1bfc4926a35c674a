application_id = "app"

admin {
  listen    = ":9464"
  advertise = "statehost-1:9464"
}

# expect: 4:15: error: Admin listener without a token | Set admin.token (or the environment variable STATEHOST_ADMIN_TOKEN)
