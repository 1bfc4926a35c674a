application_id = "word count!"

# expect: 1:18: error: Invalid application_id | "word count!" may contain only ASCII letters, digits, '.', '_' and '-'
