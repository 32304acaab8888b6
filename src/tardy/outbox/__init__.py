"""outbox"""
