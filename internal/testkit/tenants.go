package testkit

// AcmeTenants is the head of a governance block with the tenant tree most
// tests count against: org acme, its teams ml and search, and dev1 and
// dev2 in ml. A test's config is AcmeTenants followed by its limits.
const AcmeTenants = `governance:
  enabled: true
  tenants:
    - org: acme
      teams: [ml, search]
      users: { ml: [dev1, dev2] }
`

// AcmeBetaTenants is AcmeTenants with a second org, beta (team x, user
// y), for the tests that need a tenant outside acme.
const AcmeBetaTenants = AcmeTenants + `    - org: beta
      teams: [x]
      users: { x: [y] }
`

// Dev1Tenants is the head of a governance block with the smallest tree
// with a user: org acme, team ml, user dev1.
const Dev1Tenants = `governance:
  enabled: true
  tenants:
    - org: acme
      teams: [ml]
      users: { ml: [dev1] }
`
