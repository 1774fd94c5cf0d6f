# baton-server image: build with the Rust toolchain, run on a slim Debian as a non-root user.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY proto proto
COPY server server
COPY client client
COPY tests tests
COPY migrations migrations
RUN cargo build --release --locked -p baton-server

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/baton --create-home baton
COPY --from=build /src/target/release/baton-server /usr/local/bin/baton-server
USER baton
ENV BATON_LISTEN=0.0.0.0:7437
EXPOSE 7437
ENTRYPOINT ["baton-server"]
