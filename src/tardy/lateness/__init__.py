"""lateness"""
