use super::*;
use pretty_assertions::assert_eq;

fn run(input: &str) -> String {
    Assignments::new().apply(input).into_owned()
}

#[test]
fn a_remembered_verdict_is_the_verdict() {
    // Verdicts are remembered from one candidate to the next: the same value after
    // another name, in another context or at another strength must be judged anew.
    let pieces = [
        "api_key=\"q7VbN2xK9mPzR4tLw8Yc\"",
        "api_key: q7VbN2xK9mPzR4tLw8Yc",
        "page_token=q7VbN2xK9mPzR4tLw8Yc",
        "PASSWORD=PASSWORD_VALUE",
        "password = PASSWORD_VALUE",
        "cache_key=q7VbN2xK9mPzR4tLw8Yc",
        "x_api_key = \"x_api_key\"",
        "token = \"x_api_key\"",
        "the password is Harbor4417!",
        "the token is Harbor4417!",
        "the password is 'Harbor4417!'",
        "DB_PASSWORD=hunter2hunter2",
        "db_password: hunter2hunter2",
    ];
    for a in pieces {
        for b in pieces {
            for sep in [" ", "\n"] {
                let text = format!("{a}{sep}{b}{sep}{a}");
                let expected = format!("{}{sep}{}{sep}{}", run(a), run(b), run(a));
                assert_eq!(run(&text), expected, "{text:?}");
            }
        }
    }
}

#[test]
fn env_and_shell_assignments() {
    let input = "DB_PASSWORD=postgres123\nexport GITLAB_TOKEN=Zq8Wm3Xr7Kp2Ln9V\nAPP_SECRET=supersecretvalue\n";
    assert_eq!(
        run(input),
        "DB_PASSWORD=[REDACTED]\nexport GITLAB_TOKEN=[REDACTED]\nAPP_SECRET=[REDACTED]\n"
    );
}

#[test]
fn env_references_are_untouched() {
    let input = "DB_PASSWORD=$POSTGRES_PASSWORD\nGITLAB_TOKEN=${CI_JOB_TOKEN}\n\
                     NPM_TOKEN=${{ secrets.NPM_TOKEN }}\nAPI_TOKEN=$(gh auth token)\n\
                     echo ${API_TOKEN:-default123value}\nOPENAI_API_KEY=\nAPI_KEY=<YOUR_API_KEY>\n\
                     PRIMARY_KEY=identifier_column\nSECRET_KEY=changeme\nAPI_KEY=your-api-key\n";
    assert_eq!(run(input), input);
}

#[test]
fn json_yaml_and_code_literals() {
    let cases = [
        (
            r#"{"api_key": "q7VbN2xK9mPz", "n": 1}"#,
            r#"{"api_key": "[REDACTED]", "n": 1}"#,
        ),
        (
            r#"{\"client_secret\":\"Hs8Dj3Fg6Kl1\"}"#,
            r#"{\"client_secret\":\"[REDACTED]\"}"#,
        ),
        (
            "password: 'correct horse battery'",
            "password: '[REDACTED]'",
        ),
        (
            "  access_token: ya29a0AfH6SMB3x\n",
            "  access_token: [REDACTED]\n",
        ),
        (
            "client = Client(api_key=\"Tg5Xk2Rm9Qp4\")",
            "client = Client(api_key=\"[REDACTED]\")",
        ),
        (
            "spring.datasource.password=hunter2hunter2",
            "spring.datasource.password=[REDACTED]",
        ),
        (
            "mysql --password=Pz4Lw7Nz3Bv8 db",
            "mysql --password=[REDACTED] db",
        ),
        ("X-Auth-Token: 9f8e7d6c5b4a3210", "X-Auth-Token: [REDACTED]"),
        (
            "const apiKey = `Hc6Jd1Fs0YaT`;",
            "const apiKey = `[REDACTED]`;",
        ),
        (
            "\\nSECRET_KEY=django-insecure-value\\n",
            "\\nSECRET_KEY=[REDACTED]\\n",
        ),
        (
            "\x1b[33mAPI_KEY\x1b[0m=\x1b[31mq7VbN2xK9mPz\x1b[0m",
            "\x1b[33mAPI_KEY\x1b[0m=\x1b[31m[REDACTED]\x1b[0m",
        ),
        (
            "GET /cb?state=1&token=a1b2c3d4e5f6&x=2",
            "GET /cb?state=1&token=[REDACTED]&x=2",
        ),
        ("token=q7VbN2xK9mPz", "token=[REDACTED]"),
        (
            "const apiKey: string = 'Fs0YaTg5Pz4L';",
            "const apiKey: string = '[REDACTED]';",
        ),
        (
            "    api_key: str = \"Fs0YaTg5Pz4L\"",
            "    api_key: str = \"[REDACTED]\"",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(run(input), expected, "input: {input}");
    }
}

#[test]
fn short_values_are_untouched_except_passwords() {
    assert_eq!(run("token: \"a1b2c3d\""), "token: \"a1b2c3d\"");
    assert_eq!(
        run("\"api_key\": \"q7VbN2xK\""),
        "\"api_key\": \"[REDACTED]\""
    );
    // People choose short passwords; four characters in quotes or an env file are
    // enough, six unquoted.
    assert_eq!(run("password: \"hunter2\""), "password: \"[REDACTED]\"");
    assert_eq!(run("DB_PASSWORD=root"), "DB_PASSWORD=[REDACTED]");
    assert_eq!(run("password: abc12"), "password: abc12");
    assert_eq!(run("password: hunter2"), "password: [REDACTED]");
}

#[test]
fn code_and_prose_are_untouched() {
    let input = "token: string\n\
                     api_key: Optional[str] = None\n\
                     client_secret: ClientSecret,\n\
                     secret_key = settings.SECRET_KEY\n\
                     access_token = response.json()[\"access_token\"]\n\
                     token = getToken(user1)\n\
                     api_key = os.environ[\"OPENAI_API_KEY\"]\n\
                     const key = process.env.OPENAI_API_KEY;\n\
                     if password == \"hunter2hunter2\" {}\n\
                     let t = Token::new(a1b2c3d4e5);\n\
                     The password: is kept in the vault.\n\
                     max_tokens: 4096\n\
                     API_KEY: required\n\
                     \"password\": \"${DB_PASSWORD}\"\n\
                     password = \"***\"\n\
                     \"token\": \"xxxxxxxxxxxx\"\n\
                     \"token\": \"[REDACTED]\"\n\
                     OPENAI_API_KEY\n\
                     pub const IFLA_INET6_TOKEN: _bindgen_ty_5 = _bindgen_ty_5::IFLA_INET6_TOKEN;\n\
                     pub const SYS_memfd_secret: c_long = __X32_SYSCALL_BIT + 447;\n\
                     pub const ASC_REQ_NO_TOKEN: ASC_REQ_FLAGS = 16777216u32;\n\
                     pub const FILTER_E_PASSWORD: HRESULT = 0x8004170B_u32 as _;\n\
                     pub frag_token: crate::__u32,\n\
                     {\"progressToken\": \"progress-1\", \"nextPageToken\": \"CAoQAA9x2\"}\n\
                     {\"access_token\":\"fresh-token\",\"refresh_token\":\"unsupported\"}\n";
    assert_eq!(run(input), input);
}

/// One positive and one negative case per generic family.
#[test]
fn every_generic_family() {
    let cases: &[(&str, &str, &str, &str)] = &[
            (
                "password-assignment",
                "services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: supersecret\n",
                "services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: [REDACTED]\n",
                "password: hashedPassword\nPassword: required\nself.password = password\n",
            ),
            (
                "passphrase-assignment",
                "ssh_passphrase = 'correct horse battery staple'",
                "ssh_passphrase = '[REDACTED]'",
                "passphrase: <prompted>",
            ),
            (
                "secret-assignment",
                "client_secret: Hs8Dj3Fg6Kl1Zx4C",
                "client_secret: [REDACTED]",
                "client_secret: ClientSecret,",
            ),
            (
                "token-assignment",
                "{\"refresh_token\":\"Zq8Wm3Xr7Kp2Ln9V\"}",
                "{\"refresh_token\":\"[REDACTED]\"}",
                "{\"nextPageToken\": \"CAoQAA9x2\", \"access_token\": \"fresh-token\"}",
            ),
            (
                "api-key-assignment",
                "const apiKey = `Hc6Jd1Fs0YaT`;",
                "const apiKey = `[REDACTED]`;",
                "api_key = os.environ[\"OPENAI_API_KEY\"]",
            ),
            (
                "access-or-secret-key-assignment",
                "AWS_SECRET_KEY=q7VbN2xK9mPzR4tL",
                "AWS_SECRET_KEY=[REDACTED]",
                "secret_key = settings.SECRET_KEY",
            ),
            (
                "private-key-assignment",
                "\"private_key\": \"a1b2c3d4e5f6a7b8\"",
                "\"private_key\": \"[REDACTED]\"",
                "private_key: PathBuf,",
            ),
            (
                "credential-assignment",
                "registry_credentials=Zq8Wm3Xr7Kp2Ln9V",
                "registry_credentials=[REDACTED]",
                "fetch(url, { credentials: \"include\" })",
            ),
            (
                "auth-assignment",
                "{\"auths\":{\"ghcr.io\":{\"auth\":\"bWU6cTdWYk4yeEs5bVB6\"}}}",
                "{\"auths\":{\"ghcr.io\":{\"auth\":\"[REDACTED]\"}}}",
                "auth: true\noauth: \"oauth2\"\nauth = AuthConfig(user)",
            ),
            (
                "secret-value-assignment",
                "{\"Name\":\"prod/db\",\"SecretString\":\"harbor4417\"}",
                "{\"Name\":\"prod/db\",\"SecretString\":\"[REDACTED]\"}",
                "\"SecretString\": null\nsecret_string = jsonencode(local.db)",
            ),
            (
                "encryption-key-assignment",
                "APP_KEY=base64:Qm9vdHN0cmFwIHRoZSBrZXkgZm9yIHRlc3Rz5a1=\nHMAC_KEY=9f8e7d6c5b4a32109f8e7d6c5b4a3210",
                "APP_KEY=[REDACTED]\nHMAC_KEY=[REDACTED]",
                "APP_KEY=\nENCRYPTION_KEY_ID=123e4567-e89b-12d3-a456-426614174000\n\
                 SIGNING_KEY=arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            ),
            (
                "vendor-key-assignment",
                "ALGOLIA_ADMIN_KEY=9f8e7d6c5b4a32109f8e7d6c5b4a3210\nazure.openai.key=0a1b2c3d4e5f60718293a4b5c6d7e8f9",
                "ALGOLIA_ADMIN_KEY=[REDACTED]\nazure.openai.key=[REDACTED]",
                "openai_cache_key=9f8e7d6c5b4a32109f8e7d6c5b4a3210\nPAGERDUTY_DEDUP_KEY=123e4567-e89b-12d3-a456-426614174000\n\
                 STRIPE_PUBLISHABLE_KEY=pk_live_51HqLyjWDarjtT1zdp7dc",
            ),
            (
                "other-key-assignment",
                "STRIPE_KEY=Zq8Wm3Xr7Kp2Ln9VbT4c\nlicenseKey: \"Q7vBn2Xk9MpZr4TlWy8C\"",
                "STRIPE_KEY=[REDACTED]\nlicenseKey: \"[REDACTED]\"",
                "PRIMARY_KEY=identifier_column\ncacheKey: \"Zq8Wm3Xr7Kp2Ln9VbT4c\"\n\
                 object_key: uploads/2024/a1b2c3d4e5f6.png\nmonkey=Zq8Wm3Xr7Kp2Ln9VbT4c\n\
                 etag_key: 3f786850e387550fdab836ed7e6dc881de23001b",
            ),
        ];
    for family in KEYWORDS {
        assert!(
            cases.iter().any(|c| c.0 == family.family),
            "family {} has no case",
            family.family
        );
    }
    for (family, positive, masked, negative) in cases {
        assert_eq!(run(positive), *masked, "{family}: {positive}");
        assert_eq!(run(negative), *negative, "{family}: {negative}");
    }
}

#[test]
fn passwords_in_yaml_env_and_code() {
    let cases = [
        ("password: correcthorse\n", "password: [REDACTED]\n"),
        (
            "  password: Password1  # dev\n",
            "  password: [REDACTED]  # dev\n",
        ),
        ("PASSWORD=letmein", "PASSWORD=[REDACTED]"),
        (
            "[pypi]\npassword = hunter2\n",
            "[pypi]\npassword = [REDACTED]\n",
        ),
        (
            "?user=me&password=hunter22&x=1",
            "?user=me&password=[REDACTED]&x=1",
        ),
        (
            "spring.datasource.password=Tr0ub4dor&3",
            "spring.datasource.password=[REDACTED]",
        ),
        ("Password: \"P@ss word\",", "Password: \"[REDACTED]\","),
        (
            "\"content\":\"db:\\n  password: supersecret\\n\"",
            "\"content\":\"db:\\n  password: [REDACTED]\\n\"",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(run(input), expected, "input: {input}");
    }
    let untouched = "password: String,\n\
                         password: Option<String>,\n\
                         password = None\n\
                         password = kwargs.get(\"password\")\n\
                         Password: cfg.Password,\n\
                         password: &'a str,\n\
                         password = \"***\"\n\
                         the password: supersecret is wrong\n\
                         passwd:         files systemd\n\
                         password: ${DB_PASSWORD}\n\
                         password: changeme\n\
                         self.username, self.password = credentials\n\
                         \"smithy.api#noAuth\": createSmithyApiNoAuthHttpAuthOption,\n";
    assert_eq!(run(untouched), untouched);
}

#[test]
fn dotted_property_keys_hold_literals() {
    let cases = [
        (
            "app.jwt.secret=HarborFalconLantern\n",
            "app.jwt.secret=[REDACTED]\n",
        ),
        (
            "  spring.security.oauth2.client.registration.google.client-secret: \"HarborFalcon\"",
            "  spring.security.oauth2.client.registration.google.client-secret: \"[REDACTED]\"",
        ),
        (
            "java -Dapp.jwt.secret=HarborFalconLantern -jar app.jar",
            "java -Dapp.jwt.secret=[REDACTED] -jar app.jar",
        ),
        (
            "\"spring.rabbitmq.password=HarborFalcon\\nx=1\"",
            "\"spring.rabbitmq.password=[REDACTED]\\nx=1\"",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(run(input), expected, "input: {input}");
    }
    // Code assigns fields too; a property's value is still judged as data.
    let untouched = "self.secret = HarborFalconLantern\n\
                         \x20   userdata.password = password_ptr\n\
                         \x20   creds.secret = something\n\
                         jdk.http.ntlm.transparentAuth=disabled\n\
                         app.auth.token=HarborFalconLantern\n\
                         app.jwt.secret=disabled\n\
                         this.password = hashedPassword;\n\
                         app.jwt.secret=${JWT_SECRET}\n\
                         app.jwt.secret=classpath:jwt.key\n\
                         spring.security.user.password=@@user.password@@\n\
                         app.jwt.secret = config.get(\"secret\")\n\
                         app.secret.location=/etc/app/secret.txt\n";
    assert_eq!(run(untouched), untouched);
}

#[test]
fn printed_structs_and_maps_hold_literals() {
    let cases = [
        (
            "&{Host:db Port:5432 Password:HarborFalcon DB:app}",
            "&{Host:db Port:5432 Password:[REDACTED] DB:app}",
        ),
        (
            "map[client_secret:HarborFalconLantern user:app]",
            "map[client_secret:[REDACTED] user:app]",
        ),
        (
            "[{Name:a Password:harbor4417} {Name:b Password:falcon2291}]",
            "[{Name:a Password:[REDACTED]} {Name:b Password:[REDACTED]}]",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(run(input), expected, "input: {input}");
    }
    let untouched = "{Host:db Password: DB:app}\n\
                         &{Password:<nil>}\n\
                         {password:e.password,token:t.value}\n\
                         map[password:true]\n\
                         {Password:xxxxxxxx}\n\
                         Config{Password: password}\n\
                         key:HarborFalcon\n\
                         JSON.stringify({...r,...c?{credentials:credential}:{}})\n";
    assert_eq!(run(untouched), untouched);
}

#[test]
fn secrets_in_sentences() {
    let cases = [
        (
            "The staging password is Harbor4417! and the user is admin.",
            "The staging password is [REDACTED] and the user is admin.",
        ),
        (
            "Password for the admin account is `falcon2291`.",
            "Password for the admin account is `[REDACTED]`.",
        ),
        (
            "I set the password to Meadow-7731 for now.",
            "I set the password to [REDACTED] for now.",
        ),
        (
            "My API key is q7VbN2xK9mPzR4tLw8Yc.",
            "My API key is [REDACTED].",
        ),
        (
            "\"text\":\"the db password is now harbor4417\\nbye\"",
            "\"text\":\"the db password is now [REDACTED]\\nbye\"",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(run(input), expected, "input: {input}");
    }
    let untouched = "The password is required.\n\
                         The password is at least 12 characters long.\n\
                         The password is SHA256-hashed.\n\
                         The password was last changed 2024-05-01.\n\
                         The token is valid for 24 hours.\n\
                         Hash the password to SHA256 first.\n\
                         if token is None: return\n\
                         the key is q7VbN2xK9mPzR4tLw8Yc\n\
                         The password field is empty.\n";
    assert_eq!(run(untouched), untouched);
}

#[test]
fn percent_encoded_query_parameters() {
    assert_eq!(
        run("?next=https%3A%2F%2Fx.io%2Fcb%3Fstate%3D1%26token%3Dq7VbN2xK9mPzR4tL%26v%3D2"),
        "?next=https%3A%2F%2Fx.io%2Fcb%3Fstate%3D1%26token%3D[REDACTED]%26v%3D2"
    );
    let untouched = "?next=%2Fcb%3Ftoken%3D%24%7BTOKEN%7D\n?q=secret%3Dq7VbN2xK9mPzR4tL\n";
    assert_eq!(run(untouched), untouched);
}

#[test]
fn paths_and_references_are_not_secrets() {
    let untouched = "GOOGLE_APPLICATION_CREDENTIALS=/var/secrets/google/key.json\n\
                         TLS_PRIVATE_KEY=~/.ssh/id_ed25519\n\
                         DB_PASSWORD=/run/secrets/db_password\n\
                         \"privateKey\": \"./certs/a1b2c3d4-private.pem\"\n\
                         DB_PASSWORD=arn:aws:secretsmanager:us-east-1:111122223333:secret:prod/db-a1B2c3\n\
                         \"ARN\": \"arn:aws:secretsmanager:us-east-1:111122223333:secret:prod/db-a1B2c3\"\n\
                         password: op://Engineering/Postgres/password\n\
                         api_key: https://v.vault.azure.net/secrets/api-key/0a1b2c3d4e5f60718293a4b5c6d7e8f9\n\
                         OPENAI_API_KEY=sk-proj-...a1B2\n\
                         GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n";
    assert_eq!(run(untouched), untouched);
    // Base64 may start with `/`: not a path when its parts are random or hold `+`.
    assert_eq!(
            run("CLIENT_SECRET=/q7VbN2xK9mPzR4tLw8Yc/Hs8Dj3Fg6Kl1Zx4Cv7Bn\nAPI_TOKEN=/a1b2+c3d4e5f6g7h8"),
            "CLIENT_SECRET=[REDACTED]\nAPI_TOKEN=[REDACTED]"
        );
}

#[test]
fn masked_vendor_values_are_not_masked_again() {
    let input = "OPENAI_API_KEY=sk-proj-[REDACTED]\n\"token\": \"ghp_[REDACTED]\"";
    assert_eq!(run(input), input);
}
