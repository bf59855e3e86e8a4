# slurmops daemon image: one static binary on a minimal, non-root base.
#   docker build -t slurmops .
#   slurmops install --print --repo URL --image slurmops | kubectl apply -f -
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libssl-dev zlib1g-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# crt-static: glibc, OpenSSL, libgit2 and libssh2 linked in; `ldd` says "statically linked".
RUN RUSTFLAGS="-C target-feature=+crt-static" OPENSSL_STATIC=1 \
    cargo build --release --locked --target x86_64-unknown-linux-gnu \
    && cp target/x86_64-unknown-linux-gnu/release/slurmops /slurmops \
    && (ldd /slurmops || true)

# distroless static: CA certificates, /etc/passwd with nonroot (65532), no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /slurmops /usr/local/bin/slurmops
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/slurmops"]
CMD ["run"]
