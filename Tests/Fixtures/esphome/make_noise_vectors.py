#!/usr/bin/env python3
"""Writes noise-vectors.json: an ESPHome API Noise handshake and a few transport frames, made by
the `noiseprotocol` package (the Noise implementation aioesphomeapi uses, pinned in
Tests/ESPHome/requirements.txt) with fixed keys, so ESPHomeAPITests can check gattway's own
Noise_NNpsk0_25519_ChaChaPoly_SHA256 responder against an independent implementation.

Run: .venv-esphome/bin/python Tests/Fixtures/esphome/make_noise_vectors.py > Tests/Fixtures/esphome/noise-vectors.json
"""
import json

from noise.connection import Keypair, NoiseConnection

NAME = b"Noise_NNpsk0_25519_ChaChaPoly_SHA256"
PROLOGUE = b"NoiseAPIInit\x00\x00"
PSK = bytes(range(1, 33))
WRONG_PSK = bytes(range(2, 34))
CLIENT_E = bytes([0x11] * 31 + [0x40])
SERVER_E = bytes([0x22] * 31 + [0x50])


def party(initiator, psk, ephemeral):
    proto = NoiseConnection.from_name(NAME)
    if initiator:
        proto.set_as_initiator()
    else:
        proto.set_as_responder()
    proto.set_psks(psk)
    proto.set_prologue(PROLOGUE)
    proto.set_keypair_from_private_bytes(Keypair.EPHEMERAL, ephemeral)
    proto.start_handshake()
    return proto


client = party(True, PSK, CLIENT_E)
server = party(False, PSK, SERVER_E)
msg1 = client.write_message()
server.read_message(msg1)
msg2 = server.write_message()
client.read_message(msg2)
assert client.handshake_finished and server.handshake_finished

# Transport payloads as ESPHome frames them: type (16-bit BE), length (16-bit BE), protobuf.
to_server = [bytes([0x00, 0x07, 0x00, 0x00]), bytes([0x00, 0x01, 0x00, 0x03, 0x0A, 0x01, 0x41])]
to_client = [bytes([0x00, 0x08, 0x00, 0x00]), bytes([0x00, 0x02, 0x00, 0x04, 0x08, 0x01, 0x10, 0x0E])]

wrong = party(True, WRONG_PSK, CLIENT_E)
wrong_msg1 = wrong.write_message()

print(json.dumps({
    "source": "Tests/Fixtures/esphome/make_noise_vectors.py with noiseprotocol==0.3.1",
    "prologue": PROLOGUE.hex(),
    "psk": PSK.hex(),
    "client_ephemeral_private": CLIENT_E.hex(),
    "server_ephemeral_private": SERVER_E.hex(),
    "client_handshake": msg1.hex(),
    "server_handshake": msg2.hex(),
    "client_handshake_wrong_psk": wrong_msg1.hex(),
    "to_server_plain": [m.hex() for m in to_server],
    "to_server_cipher": [client.encrypt(m).hex() for m in to_server],
    "to_client_plain": [m.hex() for m in to_client],
    "to_client_cipher": [server.encrypt(m).hex() for m in to_client],
}, indent=2))
