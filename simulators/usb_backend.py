"""A pyusb backend (``usb.backend.IBackend``) whose bus holds simulated devices.

Pass it as ``backend=`` to ``usb.core.find`` (or to ``UsbTransport``) and the
production pyusb code runs unchanged: enumeration, descriptors, string
descriptors over control transfers, configuration, kernel-driver detach,
interface claiming, and bulk transfers on one vendor-specific interface with a
bulk OUT (0x01) and a bulk IN (0x81) endpoint.

Each simulated device is a vendor id, product id, serial number and a
``DeviceSide``. Bytes the host writes to bulk OUT reach the DeviceSide on the
simulator's loop thread (``call_soon_threadsafe``); bytes the device sends
queue up until the host's bulk IN reads take them (a read blocks up to its
timeout, then raises ``USBTimeoutError`` as libusb's backend does).

Unplug makes every open handle fail with ``ENODEV`` (and wakes blocked reads);
re-plug puts the device back on the bus at a new address, so the host must find
and open it again, as with real hardware. Errors mirror the libusb1 backend's
(``USBError(message, libusb_code, errno)``).
"""

from __future__ import annotations

import array
import asyncio
import errno
import itertools
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import usb.backend
from usb.core import USBError, USBTimeoutError

from tablectl.drivers.usb_ids import REFERENCE_PRODUCT_IDS, REFERENCE_VENDOR_ID
from tablectl.simulators.link import DeviceSide

BULK_OUT_ADDRESS = 0x01
BULK_IN_ADDRESS = 0x81
MAX_PACKET_SIZE = 64
INTERFACE_NUMBER = 0
CONFIGURATION_VALUE = 1
LANGID_EN_US = 0x0409

# libusb error codes, as the libusb1 backend reports them in USBError.backend_error_code.
_LIBUSB_ERROR_IO = -1
_LIBUSB_ERROR_INVALID_PARAM = -2
_LIBUSB_ERROR_NO_DEVICE = -4
_LIBUSB_ERROR_NOT_FOUND = -5
_LIBUSB_ERROR_BUSY = -6
_LIBUSB_ERROR_TIMEOUT = -7
_LIBUSB_ERROR_PIPE = -9

_STRING_MANUFACTURER = 1
_STRING_PRODUCT = 2
_STRING_SERIAL = 3


def _no_device() -> USBError:
    return USBError(
        "No such device (it may have been disconnected)", _LIBUSB_ERROR_NO_DEVICE, errno.ENODEV
    )


def _error(message: str, code: int, err: int) -> USBError:
    return USBError(message, code, err)


@dataclass
class _DeviceDescriptor:
    idVendor: int
    idProduct: int
    bus: int
    address: int
    port_number: int
    bLength: int = 18
    bDescriptorType: int = 0x01
    bcdUSB: int = 0x0200
    bDeviceClass: int = 0x00
    bDeviceSubClass: int = 0x00
    bDeviceProtocol: int = 0x00
    bMaxPacketSize0: int = 64
    bcdDevice: int = 0x0100
    iManufacturer: int = _STRING_MANUFACTURER
    iProduct: int = _STRING_PRODUCT
    iSerialNumber: int = _STRING_SERIAL
    bNumConfigurations: int = 1
    speed: int = 3  # libusb LIBUSB_SPEED_HIGH
    port_numbers: tuple[int, ...] = ()

    def pack(self) -> bytes:
        return struct.pack(
            "<BBHBBBBHHHBBBB",
            self.bLength,
            self.bDescriptorType,
            self.bcdUSB,
            self.bDeviceClass,
            self.bDeviceSubClass,
            self.bDeviceProtocol,
            self.bMaxPacketSize0,
            self.idVendor,
            self.idProduct,
            self.bcdDevice,
            self.iManufacturer,
            self.iProduct,
            self.iSerialNumber,
            self.bNumConfigurations,
        )


@dataclass
class _ConfigurationDescriptor:
    bLength: int = 9
    bDescriptorType: int = 0x02
    wTotalLength: int = 9 + 9 + 7 + 7
    bNumInterfaces: int = 1
    bConfigurationValue: int = CONFIGURATION_VALUE
    iConfiguration: int = 0
    bmAttributes: int = 0x80  # bus powered
    bMaxPower: int = 50  # 100 mA
    extra_descriptors: list[int] = field(default_factory=list)

    def pack(self) -> bytes:
        return struct.pack(
            "<BBHBBBBB",
            self.bLength,
            self.bDescriptorType,
            self.wTotalLength,
            self.bNumInterfaces,
            self.bConfigurationValue,
            self.iConfiguration,
            self.bmAttributes,
            self.bMaxPower,
        )


@dataclass
class _InterfaceDescriptor:
    bLength: int = 9
    bDescriptorType: int = 0x04
    bInterfaceNumber: int = INTERFACE_NUMBER
    bAlternateSetting: int = 0
    bNumEndpoints: int = 2
    bInterfaceClass: int = 0xFF  # vendor specific: the reference protocol
    bInterfaceSubClass: int = 0x00
    bInterfaceProtocol: int = 0x00
    iInterface: int = 0
    extra_descriptors: list[int] = field(default_factory=list)

    def pack(self) -> bytes:
        return struct.pack(
            "<BBBBBBBBB",
            self.bLength,
            self.bDescriptorType,
            self.bInterfaceNumber,
            self.bAlternateSetting,
            self.bNumEndpoints,
            self.bInterfaceClass,
            self.bInterfaceSubClass,
            self.bInterfaceProtocol,
            self.iInterface,
        )


@dataclass
class _EndpointDescriptor:
    bEndpointAddress: int
    bLength: int = 7
    bDescriptorType: int = 0x05
    bmAttributes: int = 0x02  # bulk
    wMaxPacketSize: int = MAX_PACKET_SIZE
    bInterval: int = 0
    bRefresh: int = 0
    bSynchAddress: int = 0
    extra_descriptors: list[int] = field(default_factory=list)

    def pack(self) -> bytes:
        return struct.pack(
            "<BBBBHB",
            self.bLength,
            self.bDescriptorType,
            self.bEndpointAddress,
            self.bmAttributes,
            self.wMaxPacketSize,
            self.bInterval,
        )


_CONFIGURATION = _ConfigurationDescriptor()
_INTERFACE = _InterfaceDescriptor()
_ENDPOINTS = (
    _EndpointDescriptor(bEndpointAddress=BULK_OUT_ADDRESS),
    _EndpointDescriptor(bEndpointAddress=BULK_IN_ADDRESS),
)


class SimulatedUsbDevice:
    """One device on the simulated bus: identity, descriptors, IN queue and plug state."""

    def __init__(
        self,
        backend: SimulatedUsbBackend,
        vendor_id: int,
        product_id: int,
        serial_number: str,
        device: DeviceSide,
        manufacturer: str,
        product: str,
        kernel_driver_attached: bool,
        max_in_transfer: int | None,
        port_number: int,
    ) -> None:
        self.backend = backend
        self.vendor_id = vendor_id
        self.product_id = product_id
        self.serial_number = serial_number
        self.device = device
        self.manufacturer = manufacturer
        self.product = product
        #: True while a (simulated) kernel driver holds the interface; claim fails with EBUSY.
        self.kernel_driver_attached = kernel_driver_attached
        #: Cap on bytes returned by one bulk IN read (to exercise partial reads); None = no cap.
        self.max_in_transfer = max_in_transfer
        self.port_number = port_number
        self.plugged = False
        self.address = 0
        #: Bumped on every plug; handles from an earlier plug fail with ENODEV.
        self.generation = 0
        self.configuration = 0
        self.claimed_by: _Handle | None = None
        self._in = bytearray()
        self._cond = threading.Condition()
        #: Bytes the host wrote to bulk OUT (counted for tests and figures).
        self.bytes_out = 0
        #: Bytes the device sent that were dropped because it was unplugged.
        self.dropped_bytes = 0

    def __repr__(self) -> str:
        return (
            f"<SimulatedUsbDevice {self.vendor_id:04x}:{self.product_id:04x} "
            f"serial={self.serial_number!r} plugged={self.plugged}>"
        )

    def descriptor(self) -> _DeviceDescriptor:
        return _DeviceDescriptor(
            idVendor=self.vendor_id,
            idProduct=self.product_id,
            bus=1,
            address=self.address,
            port_number=self.port_number,
            port_numbers=(self.port_number,),
        )

    def send(self, data: bytes) -> None:
        """The DeviceSide's ``send``: queue bytes for the host's bulk IN reads (any thread)."""
        with self._cond:
            if not self.plugged:
                self.dropped_bytes += len(data)
                return
            self._in += data
            self._cond.notify_all()

    # -- bus events (called by the backend) ----------------------------------

    def _plug(self, address: int) -> None:
        with self._cond:
            self.plugged = True
            self.generation += 1
            self.address = address
            self.configuration = CONFIGURATION_VALUE  # the kernel configures it at enumeration
            self.claimed_by = None
            self._in.clear()

    def _unplug(self) -> None:
        with self._cond:
            self.plugged = False
            self.claimed_by = None
            self._in.clear()
            self._cond.notify_all()

    def _read_in(self, size: int, timeout_ms: int, handle: _Handle) -> bytes:
        deadline_s = None if timeout_ms == 0 else timeout_ms / 1000.0
        with self._cond:
            ok = self._cond.wait_for(
                lambda: not handle.valid() or bool(self._in), timeout=deadline_s
            )
            if not handle.valid():
                raise _no_device()
            if not ok:
                raise USBTimeoutError("Operation timed out", _LIBUSB_ERROR_TIMEOUT, errno.ETIMEDOUT)
            limit = size if self.max_in_transfer is None else min(size, self.max_in_transfer)
            data = bytes(self._in[:limit])
            del self._in[:limit]
            return data


class _Handle:
    """What ``open_device`` returns: valid until close or until the device is unplugged."""

    def __init__(self, device: SimulatedUsbDevice) -> None:
        self.device = device
        self.generation = device.generation
        self.closed = False

    def valid(self) -> bool:
        return not self.closed and self.device.plugged and self.device.generation == self.generation


class SimulatedUsbBackend(usb.backend.IBackend):  # type: ignore[misc]
    """A simulated USB bus for pyusb; DeviceSide callbacks run on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self._devices: list[SimulatedUsbDevice] = []
        self._lock = threading.RLock()
        self._addresses = itertools.count(2)
        self._ports = itertools.count(1)

    # -- managing the bus -------------------------------------------------------

    def add_device(
        self,
        vendor_id: int,
        product_id: int,
        serial_number: str,
        device: DeviceSide,
        *,
        manufacturer: str = "tablectl",
        product: str = "tablectl simulated device",
        kernel_driver_attached: bool = False,
        max_in_transfer: int | None = None,
        plugged: bool = True,
    ) -> SimulatedUsbDevice:
        """Put a simulated device on the bus (plugged in unless ``plugged=False``)."""
        for name, value in (("vendor_id", vendor_id), ("product_id", product_id)):
            if not isinstance(value, int) or not 0 <= value <= 0xFFFF:
                raise ValueError(f"simulated USB device: {name} must be 0..0xFFFF, got {value!r}")
        if not serial_number:
            raise ValueError("simulated USB device: serial_number must be a non-empty string")
        with self._lock:
            sim = SimulatedUsbDevice(
                self,
                vendor_id,
                product_id,
                serial_number,
                device,
                manufacturer,
                product,
                kernel_driver_attached,
                max_in_transfer,
                next(self._ports),
            )
            self._devices.append(sim)
        if plugged:
            self.plug(sim)
        return sim

    def add_reference_device(
        self, kind: str, serial_number: str, device: DeviceSide, **options: Any
    ) -> SimulatedUsbDevice:
        """Add a device with the reference ids of ``kind`` (drivers/usb_ids.py)."""
        if kind not in REFERENCE_PRODUCT_IDS:
            raise ValueError(
                f"unknown device kind {kind!r}; expected one of {', '.join(REFERENCE_PRODUCT_IDS)}"
            )
        options.setdefault("product", f"tablectl reference {kind}")
        return self.add_device(
            REFERENCE_VENDOR_ID, REFERENCE_PRODUCT_IDS[kind], serial_number, device, **options
        )

    @property
    def devices(self) -> tuple[SimulatedUsbDevice, ...]:
        with self._lock:
            return tuple(self._devices)

    def plug(self, sim: SimulatedUsbDevice) -> None:
        """Plug the device in (new bus address); its DeviceSide is connected on the loop."""
        with self._lock:
            if sim.plugged:
                return
            sim._plug(next(self._addresses))
        self.loop.call_soon_threadsafe(sim.device.connect, sim.send)

    def unplug(self, sim: SimulatedUsbDevice) -> None:
        """Pull the device: open handles fail with ENODEV; its DeviceSide is disconnected."""
        with self._lock:
            if not sim.plugged:
                return
            sim._unplug()
        self.loop.call_soon_threadsafe(sim.device.disconnect)

    # -- IBackend: enumeration and descriptors ------------------------------------

    def enumerate_devices(self) -> Iterator[SimulatedUsbDevice]:
        with self._lock:
            plugged = [sim for sim in self._devices if sim.plugged]
        return iter(plugged)

    def get_parent(self, dev: SimulatedUsbDevice) -> None:
        return None

    def get_device_descriptor(self, dev: SimulatedUsbDevice) -> _DeviceDescriptor:
        return dev.descriptor()

    def get_configuration_descriptor(
        self, dev: SimulatedUsbDevice, config: int
    ) -> _ConfigurationDescriptor:
        if config != 0:
            raise IndexError(f"configuration index {config} out of range")
        return _CONFIGURATION

    def get_interface_descriptor(
        self, dev: SimulatedUsbDevice, intf: int, alt: int, config: int
    ) -> _InterfaceDescriptor:
        if config != 0 or intf != 0 or alt != 0:
            raise IndexError(f"interface ({intf}, {alt}) of configuration {config} out of range")
        return _INTERFACE

    def get_endpoint_descriptor(
        self, dev: SimulatedUsbDevice, ep: int, intf: int, alt: int, config: int
    ) -> _EndpointDescriptor:
        if config != 0 or intf != 0 or alt != 0 or not 0 <= ep < len(_ENDPOINTS):
            raise IndexError(f"endpoint {ep} of interface ({intf}, {alt}) out of range")
        return _ENDPOINTS[ep]

    # -- IBackend: handles, configuration, interfaces -------------------------------

    def open_device(self, dev: SimulatedUsbDevice) -> _Handle:
        if not dev.plugged:
            raise _no_device()
        return _Handle(dev)

    def close_device(self, dev_handle: _Handle) -> None:
        dev = dev_handle.device
        with dev._cond:
            if dev.claimed_by is dev_handle:
                dev.claimed_by = None
            dev_handle.closed = True
            dev._cond.notify_all()

    def _check(self, dev_handle: _Handle) -> SimulatedUsbDevice:
        if not dev_handle.valid():
            raise _no_device()
        return dev_handle.device

    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:
        dev = self._check(dev_handle)
        if config_value not in (0, CONFIGURATION_VALUE):
            raise _error("Entity not found", _LIBUSB_ERROR_NOT_FOUND, errno.ENOENT)
        if dev.claimed_by is not None and dev.claimed_by is not dev_handle:
            raise _error("Resource busy", _LIBUSB_ERROR_BUSY, errno.EBUSY)
        dev.configuration = config_value

    def get_configuration(self, dev_handle: _Handle) -> int:
        return self._check(dev_handle).configuration

    def set_interface_altsetting(self, dev_handle: _Handle, intf: int, altsetting: int) -> None:
        self._check(dev_handle)
        if intf != INTERFACE_NUMBER or altsetting != 0:
            raise _error("Entity not found", _LIBUSB_ERROR_NOT_FOUND, errno.ENOENT)

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:
        dev = self._check(dev_handle)
        if intf != INTERFACE_NUMBER or dev.configuration != CONFIGURATION_VALUE:
            raise _error("Entity not found", _LIBUSB_ERROR_NOT_FOUND, errno.ENOENT)
        with dev._cond:
            if dev.kernel_driver_attached or (
                dev.claimed_by is not None and dev.claimed_by is not dev_handle
            ):
                raise _error("Resource busy", _LIBUSB_ERROR_BUSY, errno.EBUSY)
            dev.claimed_by = dev_handle

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:
        dev = self._check(dev_handle)
        with dev._cond:
            if intf != INTERFACE_NUMBER or dev.claimed_by is not dev_handle:
                raise _error("Entity not found", _LIBUSB_ERROR_NOT_FOUND, errno.ENOENT)
            dev.claimed_by = None

    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:
        return self._check(dev_handle).kernel_driver_attached

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        dev = self._check(dev_handle)
        if not dev.kernel_driver_attached:
            raise _error("Entity not found", _LIBUSB_ERROR_NOT_FOUND, errno.ENOENT)
        dev.kernel_driver_attached = False

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        dev = self._check(dev_handle)
        if dev.claimed_by is not None:
            raise _error("Resource busy", _LIBUSB_ERROR_BUSY, errno.EBUSY)
        dev.kernel_driver_attached = True

    def clear_halt(self, dev_handle: _Handle, ep: int) -> None:
        self._check(dev_handle)

    def reset_device(self, dev_handle: _Handle) -> None:
        dev = self._check(dev_handle)
        with dev._cond:
            dev.claimed_by = None
            dev._in.clear()

    # -- IBackend: transfers ----------------------------------------------------

    def bulk_write(
        self, dev_handle: _Handle, ep: int, intf: int, data: array.array[int], timeout: int
    ) -> int:
        dev = self._check(dev_handle)
        if ep != BULK_OUT_ADDRESS or intf != INTERFACE_NUMBER:
            raise _error("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
        if dev.claimed_by is not dev_handle:
            raise _error("Resource busy", _LIBUSB_ERROR_BUSY, errno.EBUSY)
        payload = data.tobytes()
        dev.bytes_out += len(payload)
        if payload:
            try:
                self.loop.call_soon_threadsafe(self._deliver, dev, dev_handle.generation, payload)
            except RuntimeError as closed:  # the simulator's loop is gone: the device is too
                raise _no_device() from closed
        return len(payload)

    def _deliver(self, dev: SimulatedUsbDevice, generation: int, payload: bytes) -> None:
        """On the loop: hand OUT bytes to the DeviceSide unless it was unplugged meanwhile."""
        if dev.plugged and dev.generation == generation:
            dev.device.receive(payload)

    def bulk_read(
        self, dev_handle: _Handle, ep: int, intf: int, buff: array.array[int], timeout: int
    ) -> int:
        dev = self._check(dev_handle)
        if ep != BULK_IN_ADDRESS or intf != INTERFACE_NUMBER:
            raise _error("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
        if dev.claimed_by is not dev_handle:
            raise _error("Resource busy", _LIBUSB_ERROR_BUSY, errno.EBUSY)
        data = dev._read_in(len(buff) * buff.itemsize, timeout, dev_handle)
        view = memoryview(buff).cast("B")
        view[: len(data)] = data
        return len(data)

    def ctrl_transfer(
        self,
        dev_handle: _Handle,
        bmRequestType: int,
        bRequest: int,
        wValue: int,
        wIndex: int,
        data: array.array[int],
        timeout: int,
    ) -> int:
        """Standard GET_DESCRIPTOR (device, configuration, string); anything else stalls."""
        dev = self._check(dev_handle)
        if bmRequestType != 0x80 or bRequest != 0x06:
            raise _error("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
        desc_type, desc_index = wValue >> 8, wValue & 0xFF
        if desc_type == 0x01:
            reply = dev.descriptor().pack()
        elif desc_type == 0x02 and desc_index == 0:
            reply = (
                _CONFIGURATION.pack() + _INTERFACE.pack() + b"".join(e.pack() for e in _ENDPOINTS)
            )
        elif desc_type == 0x03:
            reply = self._string_descriptor(dev, desc_index, wIndex)
        else:
            raise _error("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
        size = len(data) * data.itemsize
        reply = reply[:size]
        memoryview(data).cast("B")[: len(reply)] = reply
        return len(reply)

    @staticmethod
    def _string_descriptor(dev: SimulatedUsbDevice, index: int, langid: int) -> bytes:
        if index == 0:
            return struct.pack("<BBH", 4, 0x03, LANGID_EN_US)
        strings = {
            _STRING_MANUFACTURER: dev.manufacturer,
            _STRING_PRODUCT: dev.product,
            _STRING_SERIAL: dev.serial_number,
        }
        if index not in strings or langid != LANGID_EN_US:
            raise _error("Pipe error", _LIBUSB_ERROR_PIPE, errno.EPIPE)
        encoded = strings[index].encode("utf-16-le")[:252]
        return bytes((len(encoded) + 2, 0x03)) + encoded
